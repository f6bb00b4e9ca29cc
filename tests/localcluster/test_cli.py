"""`stepscope local-cluster` as a first-time user meets it: `eval "$(stepscope local-cluster --background)"` leaves a
shell with KUBECONFIG and the S3 variables; with no extra flags the operator runs, `kubectl apply` validates the
minimal example (no --validate=false), `kubectl explain` works, the session gets a phase from the operator, `kubectl
get events` shows REASON, a cross-field mistake gets its CEL message; `--stop` leaves nothing running. In the
foreground it prints the same lines and stops on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
REPO = Path(__file__).resolve().parents[2]
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")


def _shell(env_lines: str, script: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'set -e; eval "$ENV_LINES"; {script}'],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=cwd,
        env={**os.environ, "ENV_LINES": env_lines, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )


def _until(predicate: object, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_first_contact_in_the_background(tmp_path: Path) -> None:
    workdir = tmp_path / "lc"
    started = subprocess.run(
        [STEPSCOPE, "local-cluster", "--background", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    lines = started.stdout
    assert lines.startswith("export KUBECONFIG=") and "export AWS_ENDPOINT_URL=http://127.0.0.1:" in lines, lines
    assert "export AWS_ACCESS_KEY_ID=" in lines and "export AWS_SECRET_ACCESS_KEY=" in lines
    assert all(line.startswith(("export ", "#")) for line in lines.splitlines()), lines
    pid = int((workdir / "local-cluster.pid").read_text())
    try:
        applied = _shell(lines, "kubectl apply -f examples/profilesession-minimal.yaml")
        assert applied.returncode == 0 and "trainer-minimal created" in applied.stdout, applied.stderr
        explained = _shell(lines, "kubectl explain profilesession.spec.capture")
        assert explained.returncode == 0 and "training steps to record" in explained.stdout, explained.stderr

        def phase() -> str:
            got = _shell(lines, "kubectl get profs trainer-minimal -o jsonpath='{.status.phase}'")
            return got.stdout.strip()

        _until(lambda: phase() == "Resolving", "the operator never gave the session a phase")
        events = _shell(lines, "kubectl get events")
        header = events.stdout.splitlines()[0].split()
        assert header == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], events.stdout
        assert "WaitingForTargets" in events.stdout and "profilesession/trainer-minimal" in events.stdout

        mistake = tmp_path / "both.yaml"
        mistake.write_text(
            "apiVersion: stepscope.dev/v1alpha1\nkind: ProfileSession\nmetadata: {name: both}\n"
            "spec:\n  targets: {selector: {matchLabels: {app: t}}, jobRef: {kind: TrainJob, name: llama}}\n"
            "  storage: {uri: 's3://stepscope-traces/x'}\n"
        )
        refused = _shell(lines, f"kubectl apply -f {mistake}")
        assert refused.returncode != 0
        assert "spec.targets: Invalid value" in refused.stderr and "not both" in refused.stderr, refused.stderr

        s3 = _shell(
            lines,
            'aws s3 ls 2>/dev/null || python -c \'import boto3; print(boto3.client("s3").list_buckets()["Buckets"])\'',
        )
        assert "stepscope-demo" in s3.stdout and "stepscope-traces" in s3.stdout, s3.stdout + s3.stderr
        children = psutil.Process(pid).children(recursive=True)
        assert any("operator" in " ".join(c.cmdline()) for c in children)
    finally:
        stopped = subprocess.run(
            [STEPSCOPE, "local-cluster", "--stop", "--workdir", str(workdir)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert not (workdir / "env.sh").exists()


def test_foreground_prints_the_lines_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [STEPSCOPE, "local-cluster", "--no-operator", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    while not lines or not lines[-1].startswith("# Ctrl-C"):
        line = proc.stdout.readline()
        assert line, "".join(lines)
        lines.append(line)
    assert lines[0].startswith("export KUBECONFIG=") and "operator: not started (--no-operator)" in "".join(lines)
    assert (tmp_path / "env.sh").read_text() in "".join(lines)
    children = psutil.Process(proc.pid).children(recursive=True)
    again = subprocess.run(
        [STEPSCOPE, "local-cluster", "--workdir", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert again.returncode == 1 and "already runs" in again.stderr
    got = _shell("".join(lines), "kubectl get crd -o name")
    assert "profilesessions.stepscope.dev" in got.stdout, got.stderr
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "local cluster stopped" in out
    assert children and not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
