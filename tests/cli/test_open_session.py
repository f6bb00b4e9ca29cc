"""`stepscope fetch NAME` and `stepscope open NAME` on the local cluster (no operator: a session whose status names
its folder, as the operator leaves it): the folder comes down as stored, with the install's storage settings and
credentials Secret, and the report's links to each rank's trace, stacks and Flight Recorder dump work in the copy;
a session without artifacts, or without a report, says so."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepscope_analyzer.ranks.storage_io import location_of
from stepscope_analyzer.report import html_bytes, with_trace_links
from stepscope_local.cluster import LocalCluster
from stepscope_local.install import STORAGE_BASE, install

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyzer_job"))

from test_demo_sessions import SESSIONS

from stepscope_testing.local_analysis import analyse_folder

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")
API = "stepscope.dev/v1alpha1"
FOLDER = f"{STORAGE_BASE}/default/demo-hang-0001"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("open")
    with LocalCluster(workdir=workdir / "cluster") as c:
        install(c)
        yield c


def _upload_hang_session(cluster: LocalCluster, tmp: Path) -> None:
    """The demo's hang session with its report (links relative to report/), in the install's bucket."""
    local = tmp / "upload"
    import shutil

    shutil.copytree(SESSIONS / "hang" / "traces", local / "traces")
    (local / "report").mkdir()
    report = with_trace_links(analyse_folder(local), location_of(str(local / "report")))
    (local / "report" / "report.html").write_bytes(html_bytes(report))
    assert cluster.s3 is not None
    bucket, prefix = FOLDER.removeprefix("s3://").split("/", 1)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        key = f"{prefix}/{path.relative_to(local).as_posix()}"
        cluster.s3.client().put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def _session(cluster: LocalCluster, name: str, artifacts: str | None) -> None:
    cluster.api.apply({
        "apiVersion": API, "kind": "ProfileSession", "metadata": {"name": name, "namespace": "default"},
        "spec": {"targets": {"selector": {"matchLabels": {"app": "nobody"}}}, "storage": {"uri": STORAGE_BASE}},
    })  # fmt: skip
    if artifacts:
        cluster.api.patch_status(API, "profilesessions", "default", name, {"artifactsUri": artifacts})


def _run(cluster: LocalCluster, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STEPSCOPE, *args, "--kubeconfig", str(cluster.kubeconfig_path)], capture_output=True,
                          text=True, timeout=120, check=False, cwd=cwd)  # fmt: skip


def test_fetch_and_open_by_name(cluster: LocalCluster, tmp_path: Path) -> None:
    _upload_hang_session(cluster, tmp_path)
    _session(cluster, "demo-hang", FOLDER)
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
