"""`stepscope fetch NAME` and `stepscope open NAME` on the local cluster (no operator: a session accepted as the
operator leaves it, its spec frozen in the accepted-spec annotation): the folder, computed from that spec and the
session's namespace, name and uid, comes down as stored, with the install's storage settings and credentials
Secret, and the report's links to each rank's trace, stacks and Flight Recorder dump work in the copy; a session
without artifacts, or without a report, says so. A forged `status.artifactsUri` (another team's folder with a
report holding `<script>`, or a `file://` folder of the caller) is named and ignored: nothing but the session's own
folder is read; a session whose own folder is on `file://` is refused (the user names such a folder as a URI).
`stepscope fetch` of a storage URI lays a session out for HTA, TensorBoard, or as stored."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepscope_analyzer.ranks.storage_io import location_of
from stepscope_analyzer.report import html_bytes, with_trace_links
from stepscope_contract.constants import ACCEPTED_SPEC_ANNOTATION
from stepscope_contract.storage import session_dir_name
from stepscope_local.cluster import LocalCluster
from stepscope_local.install import STORAGE_BASE, install

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyzer_job"))

from test_demo_sessions import SESSIONS

from stepscope_testing.local_analysis import analyse_folder

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")
API = "stepscope.dev/v1alpha1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("open")
    with LocalCluster(workdir=workdir / "cluster") as c:
        install(c)
        yield c


def _upload_hang_session(cluster: LocalCluster, tmp: Path, folder: str) -> None:
    """The demo's hang session with its report (links relative to report/), in the install's bucket at `folder`."""
    local = tmp / "upload"
    shutil.copytree(SESSIONS / "hang" / "traces", local / "traces")
    (local / "report").mkdir()
    report = with_trace_links(analyse_folder(local), location_of(str(local / "report")))
    (local / "report" / "report.html").write_bytes(html_bytes(report))
    assert cluster.s3 is not None
    bucket, prefix = folder.removeprefix("s3://").split("/", 1)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        key = f"{prefix}/{path.relative_to(local).as_posix()}"
        cluster.s3.client().put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def _session(cluster: LocalCluster, name: str, artifacts: str | None, base: str = STORAGE_BASE) -> str:
    """A session as the operator accepts it (its spec frozen in the annotation) when `artifacts` is given, with that
    status.artifactsUri ("own": its computed folder); returns its computed folder."""
    spec = {"targets": {"selector": {"matchLabels": {"app": "nobody"}}}, "storage": {"uri": base}}
    annotations = {ACCEPTED_SPEC_ANNOTATION: json.dumps(spec)} if artifacts else {}
    obj = cluster.api.apply({
        "apiVersion": API, "kind": "ProfileSession",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations}, "spec": spec,
    })  # fmt: skip
    folder = f"{base}/default/{session_dir_name(name, obj['metadata']['uid'])}"
    if artifacts:
        status = folder if artifacts == "own" else artifacts
        cluster.api.patch_status(API, "profilesessions", "default", name, {"artifactsUri": status})
    return folder


def _run(cluster: LocalCluster, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STEPSCOPE, *args, "--kubeconfig", str(cluster.kubeconfig_path)], capture_output=True,
                          text=True, timeout=120, check=False, cwd=cwd)  # fmt: skip


def test_fetch_and_open_by_name(cluster: LocalCluster, tmp_path: Path) -> None:
    folder = _session(cluster, "demo-hang", "own")
    _upload_hang_session(cluster, tmp_path, folder)
    fetched = _run(cluster, "fetch", "demo-hang", str(tmp_path / "copy"), cwd=tmp_path)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    copy = tmp_path / "copy"
    for r in range(4):
        for name in ("manifest.json", "stacks.txt", "flight_recorder.json.gz"):
            assert (copy / "traces" / f"rank{r}" / name).is_file()
    page = (copy / "report" / "report.html").read_text()
    for link in ('href="../traces/rank2/stacks.txt"', 'href="../traces/rank2/flight_recorder.json.gz"'):
        assert link in page and (copy / "report" / link.split('"')[1]).resolve().is_file()

    opened = _run(cluster, "open", "demo-hang", "--print", cwd=tmp_path)
    assert opened.returncode == 0, opened.stdout + opened.stderr
    shown = Path(opened.stdout.strip().splitlines()[-1])
    assert shown == tmp_path / "stepscope-default-demo-hang" / "report" / "report.html" and shown.is_file()
    assert "rank 2 holds the job up" in shown.read_text()


def test_a_session_without_artifacts_or_absent_says_so(cluster: LocalCluster, tmp_path: Path) -> None:
    _session(cluster, "not-yet", None)
    early = _run(cluster, "open", "not-yet", "--print", cwd=tmp_path)
    assert early.returncode == 2 and "default/not-yet has no artifacts yet" in early.stderr, early.stderr
    absent = _run(cluster, "fetch", "no-such-session", cwd=tmp_path)
    assert absent.returncode == 2 and "no ProfileSession default/no-such-session" in absent.stderr, absent.stderr


def test_a_forged_status_reads_nothing_but_the_sessions_own_folder(cluster: LocalCluster, tmp_path: Path) -> None:
    other = f"{STORAGE_BASE}/team-b/secret-run-0badc0de"  # another team's folder, its report carrying a script
    assert cluster.s3 is not None
    bucket, prefix = other.removeprefix("s3://").split("/", 1)
    page = b"<html><script>steal()</script></html>"
    cluster.s3.client().put_object(Bucket=bucket, Key=f"{prefix}/report/report.html", Body=page)
    local = tmp_path / "caller-files"
    local.mkdir()
    (local / "id_rsa").write_text("private")

    for name, forged in (("forged-bucket", other), ("forged-file", f"file://{local}")):
        _session(cluster, name, forged)
        fetched = _run(cluster, "fetch", name, str(tmp_path / name), cwd=tmp_path)
        assert f"status.artifactsUri '{forged}' is not this session's folder" in fetched.stderr, fetched.stderr
        copied = [p for p in (tmp_path / name).rglob("*") if p.is_file()] if (tmp_path / name).exists() else []
        assert copied == [] and fetched.returncode == 1, fetched.stdout + fetched.stderr
        opened = _run(cluster, "open", name, "--print", cwd=tmp_path)
        assert opened.returncode == 1 and "has no report yet" in opened.stderr, opened.stdout + opened.stderr
        assert "script" not in opened.stdout

    _session(cluster, "local-folder", "own", base=f"file://{tmp_path}/store")
    refused = _run(cluster, "fetch", "local-folder", str(tmp_path / "local"), cwd=tmp_path)
    assert refused.returncode == 2 and f"stepscope fetch file://{tmp_path}/store/default/" in refused.stderr
    assert not (tmp_path / "local").exists()


def test_fetch_merged_and_open_trace_bring_the_merged_trace_alone(cluster: LocalCluster, tmp_path: Path) -> None:
    """`stepscope fetch NAME --merged` and `stepscope open NAME --trace --print`: only report/merged/'s trace comes
    down (flat), and open prints its path."""
    from stepscope_analyzer.evidence.files import evidence_files
    from stepscope_analyzer.ranks.pipeline import discover
    from stepscope_analyzer.ranks.storage_io import LocalStore
    from stepscope_contract.storage import MERGED_TRACE_FILE, merged_trace_key, parse_storage_uri

    folder = _session(cluster, "demo-merged", "own")
    layout = discover(LocalStore(), location_of(str(SESSIONS / "host")))
    files = evidence_files(LocalStore(), layout, analyse_folder(SESSIONS / "host")).files
    assert cluster.s3 is not None
    location = parse_storage_uri(folder)
    cluster.s3.client().put_object(Bucket=location.bucket, Key=merged_trace_key(location),
                                   Body=files[f"merged/{MERGED_TRACE_FILE}"])  # fmt: skip
    cluster.s3.client().put_object(Bucket=location.bucket, Key=f"{location.prefix}/traces/rank0.pt.trace.json.gz",
                                   Body=b"not fetched")  # fmt: skip
    fetched = _run(cluster, "fetch", "demo-merged", "--merged", str(tmp_path / "m"), cwd=tmp_path)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert [p.name for p in (tmp_path / "m").rglob("*")] == [MERGED_TRACE_FILE]
    assert (tmp_path / "m" / MERGED_TRACE_FILE).read_bytes() == files[f"merged/{MERGED_TRACE_FILE}"]
    opened = _run(cluster, "open", "demo-merged", "--trace", "--print", cwd=tmp_path)
    assert opened.returncode == 0, opened.stdout + opened.stderr
    shown = Path(opened.stdout.strip().splitlines()[-1])
    assert shown == tmp_path / "stepscope-default-demo-merged" / MERGED_TRACE_FILE and shown.is_file()


def test_fetch_of_a_storage_uri_lays_the_session_out_for_hta_and_tensorboard(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """`stepscope fetch s3://… --layout hta|tensorboard|session` with an explicit endpoint and the credentials from
    the environment: the ranks' traces flat (HTA loads every rank), under the session's folder name (TensorBoard's
    run), or as stored."""
    session_uri = f"{STORAGE_BASE}/default/demo-0000abcd"
    assert cluster.s3 is not None
    bucket, prefix = session_uri.removeprefix("s3://").split("/", 1)
    for path in sorted(p for p in (SESSIONS / "host" / "traces").rglob("*") if p.is_file()):
        key = f"{prefix}/traces/{path.relative_to(SESSIONS / 'host' / 'traces').as_posix()}"
        cluster.s3.client().put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    env = {
        "AWS_ACCESS_KEY_ID": cluster.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": cluster.s3_secret_key,
        "PATH": str(Path(sys.executable).parent),
        "HOME": str(tmp_path),
    }
    names = [f"rank{r}.pt.trace.json.gz" for r in range(4)]
    for layout, expected in (
        ("hta", names),
        ("tensorboard", [f"demo-0000abcd/{n}" for n in names]),
        ("session", [f"traces/{n}" for n in names] + [f"traces/rank{r}/manifest.json" for r in range(4)]),
    ):
        dest = tmp_path / f"fetched-{layout}"
        cmd = [STEPSCOPE, "fetch", session_uri, str(dest), "--layout", layout, "--endpoint", cluster.s3_endpoint,
               "--addressing-style", "path", "--quiet"]  # fmt: skip
        fetched = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=env)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        assert set(expected) <= set(got) and (layout == "session" or got == sorted(expected)), (layout, got)
    hta = pytest.importorskip("hta.trace_analysis", reason="HTA comes with the bench dependency group")
    analysis = hta.TraceAnalysis(trace_dir=str(tmp_path / "fetched-hta"))
    assert sorted(analysis.t.traces) == [0, 1, 2, 3]
