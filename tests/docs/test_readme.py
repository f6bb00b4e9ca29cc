"""The README's shell blocks run as written, so the first contact it shows is tested: the operator gives the minimal
session a phase, `kubectl explain` and `get events` work, a cross-field mistake gets its CEL message, `stepscope
check` passes, the demo training is profiled and `--stop` ends it all.

Every ```bash block carries a marker `<!-- docs-test: KIND -->`. `local-cluster` blocks run line by line in one shell
against `stepscope local-cluster` (the training manifest gets a free rendezvous port, the cluster a temporary
workdir); `helm` blocks render their `helm install` line with `helm template` against the chart's values schema and
run their other lines against the local cluster, as does the `team` block (adding a team by label); the `ci` block
runs against a session of the local training; `no` says why a block cannot run here. The README's sample
ProfileSession passes the CRD's schema and CEL rules."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from stepscope_contract.crd import build_crd
from stepscope_local.kube.validation import validation_errors
from stepscope_local.manifests import DEMO_DIR, load_all
from stepscope_local.ports import free_port

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
HELM = REPO / ".tools" / "helm"
BIN = Path(sys.executable).parent
MARKED = re.compile(r"<!-- docs-test: (\w[\w-]*)[^>]*-->\n```bash\n(.*?)```", re.S)


def blocks(kind: str) -> list[list[str]]:
    """The logical lines (continuations joined) of every bash block marked `kind`."""
    out = []
    for marked, body in MARKED.findall(README):
        if marked == kind:
            out.append([line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip()])
    return out


@pytest.mark.unit
def test_every_shell_block_is_marked() -> None:
    assert README.count("```bash") == len(MARKED.findall(README)), "mark each ```bash block with <!-- docs-test: -->"
    assert {kind for kind, _ in MARKED.findall(README)} == {"no", "local-cluster", "helm", "ci", "team"}


@pytest.mark.unit
def test_the_sample_session_is_valid() -> None:
    sample = next(b for b in re.findall(r"```yaml\n(.*?)```", README, re.S) if "kind: ProfileSession" in b)
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert validation_errors(schema, yaml.safe_load(sample)) == []


def _helm_install_line() -> str:
    (block,) = blocks("helm")
    return next(line for line in block if line.startswith("helm install"))


@pytest.mark.integration
def test_the_helm_install_line_renders_against_the_values_schema() -> None:
    args = shlex.split(_helm_install_line())[2:]  # helm install RELEASE CHART ... -> helm template RELEASE CHART ...
    args = [a for a in args if a != "--create-namespace"]  # an install-only flag
    rendered = subprocess.run([str(HELM), "template", *args], cwd=REPO, capture_output=True, text=True, check=False)
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    settings = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-storage"))
    assert settings["data"]["STEPSCOPE_STORAGE_CREDENTIALS_SECRET"] == "stepscope-s3"
    assert settings["data"]["STEPSCOPE_STORAGE_BASE"].startswith("s3://")
    # the line the README once had fails the schema: the test above would catch it coming back
    old = [*args[:2], "--set", "storage.credentialsSecret=stepscope-s3"]
    refused = subprocess.run([str(HELM), "template", *old], cwd=REPO, capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "credentialsSecret" in refused.stderr


@dataclass
class Ran:
    line: str
    rc: int
    out: str
    err: str


def run_lines(lines: list[str], cwd: Path, env: dict[str, str], scratch: Path) -> list[Ran]:
    """Each line in one bash process (so `eval` and exports carry over), with its own exit status and output."""
    script = []
    for i, line in enumerate(lines):
        script.append(f"{{ {line}\n}} > {scratch}/{i}.out 2> {scratch}/{i}.err; echo $? > {scratch}/{i}.rc")
    subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env, timeout=1200, check=False)
    return [
        Ran(
            line,
            int((scratch / f"{i}.rc").read_text()),
            (scratch / f"{i}.out").read_text(),
            (scratch / f"{i}.err").read_text(),
        )
        for i, line in enumerate(lines)
    ]


def _free_port_job(tmp: Path) -> Path:
    """examples/demo/train-job.yaml with a free rendezvous port (29500 may be taken on a shared machine)."""
    job = load_all(DEMO_DIR / "train-job.yaml")[0]
    for item in job["spec"]["template"]["spec"]["containers"][0]["env"]:
        if item["name"] == "MASTER_PORT":
            item["value"] = str(free_port())
    path = tmp / "train-job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


@pytest.mark.e2e
@pytest.mark.timeout(1200)
def test_the_readme_runs_on_the_local_cluster(tmp_path: Path) -> None:
    workdir = tmp_path / "cluster"
    job = _free_port_job(tmp_path)

    def local(line: str) -> str:
        line = line.replace("local-cluster --background", f"local-cluster --background --workdir {workdir}")
        line = line.replace("local-cluster --stop", f"local-cluster --stop --workdir {workdir}")
        return line.replace("examples/demo/train-job.yaml", str(job))

    first, training = ([local(line) for line in b] for b in blocks("local-cluster"))
    stop = training.pop()
    assert "--stop" in stop
    (helm,) = blocks("helm")
    (ci,) = blocks("ci")
    (team,) = blocks("team")
    cluster_lines = [line for line in helm if not line.startswith("helm ")]
    session = load_all(REPO / "examples" / "profilesession.yaml")[0]
    session["metadata"]["name"] = "my-check"
    session["spec"]["analysis"] = {"enabled": False}  # the gate's Complete condition without a second analysis
    (tmp_path / "session.yaml").write_text(yaml.safe_dump(session))
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    prepare = [  # what the README's install section asks of a training namespace, in the local cluster
        "printf 'apiVersion: v1\\nkind: Namespace\\nmetadata: {name: ml-team}\\n' | kubectl apply -f -",
        "kubectl get secret stepscope-s3 -o yaml | sed 's/namespace: default/namespace: ml-team/' | "
        "grep -v -e resourceVersion -e uid: -e creationTimestamp | kubectl apply -f -",
        "kubectl label namespace ml-team stepscope.dev/profiling=enabled",  # its token Secret and analyzer account
    ]
    lines = [*first, *training, *prepare, *cluster_lines, *team, f"cd {tmp_path}", *ci, f"cd {REPO}", stop]
    ran = run_lines(lines, REPO, env, tmp_path)
    report = "\n".join(f"$ {r.line}\n[{r.rc}] {r.out[-1500:]}{r.err[-1500:]}" for r in ran)
    by_line = {r.line: r for r in ran}
    for r in ran:
        if "examples/invalid/" in r.line:
            assert r.rc != 0 and "set targets.selector or targets.jobRef, not both" in r.err, report
        else:
            assert r.rc == 0, report
    events = next(r for r in ran if r.line.startswith("kubectl get events"))
    assert events.out.splitlines()[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"], report
    checks = [r for r in ran if "stepscope check" in r.line]
    assert all("all checks passed" in r.out for r in checks) and len(checks) == 3, report
    got = [r for r in ran if r.line.startswith("kubectl get profilesessions")][-1]
    assert re.search(r"^demo\s+Succeeded\s+4/4", got.out, re.M), report
    assert re.search(r"^trainer-minimal\s+(Resolving|Failed)\s", got.out, re.M), report  # a phase from the operator
    explained = next(r for r in ran if r.line.startswith("kubectl explain"))
    assert "KIND:       ProfileSession" in explained.out and "training steps to record" in explained.out, report
    assert "condition met" in by_line[ci[1]].out, report
    assert not (workdir / "env.sh").exists() and not (workdir / "local-cluster.pid").exists()
