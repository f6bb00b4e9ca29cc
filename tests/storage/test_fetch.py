"""`stepscope fetch`: a session's folder on disk as stored, flat for HTA or as one TensorBoard run, from the current
layout and from the first one; nothing outside the destination; the exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stepscope_contract.storage import (
    MANIFEST_FILE,
    MERGED_TRACE_FILE,
    TRACE_FILE,
    FetchLayout,
    merged_trace_key,
    parse_storage_uri,
    rank_artifact_key,
    rank_location,
    report_location,
)
from stepscope_storage.fetch import fetch_session, main
from stepscope_storage.local import LocalStore

pytestmark = pytest.mark.unit


def _session(root: Path) -> str:
    """Rank 0 in the current layout, rank 1 in the first one (a folder can hold both after a migration)."""
    session = parse_storage_uri(f"file://{root}/ns/run-1234abcd")
    files = {
        rank_artifact_key(session, 0, TRACE_FILE): b"trace0",
        rank_artifact_key(session, 0, MANIFEST_FILE): b"{}",
        rank_location(session, 1).key(TRACE_FILE): b"trace1",
        report_location(session).key("report.html"): b"<html>",
    }
    for key, data in files.items():
        Path(key).parent.mkdir(parents=True, exist_ok=True)
        Path(key).write_bytes(data)
    return session.uri


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_each_layout(tmp_path: Path) -> None:
    uri = _session(tmp_path / "store")
    session = parse_storage_uri(uri)
    for layout, expected in (
        (FetchLayout.HTA, {"rank0.pt.trace.json.gz": b"trace0", "rank1.pt.trace.json.gz": b"trace1"}),
        (FetchLayout.TENSORBOARD, {"run-1234abcd/rank0.pt.trace.json.gz": b"trace0",
                                   "run-1234abcd/rank1.pt.trace.json.gz": b"trace1"}),
        (FetchLayout.SESSION, {"traces/rank0.pt.trace.json.gz": b"trace0", "traces/rank0/manifest.json": b"{}",
                               "ranks/1/trace.pt.trace.json.gz": b"trace1", "report/report.html": b"<html>"}),
    ):  # fmt: skip
        dest = tmp_path / layout.value
        fetched = fetch_session(LocalStore(), session, dest, layout)
        assert _tree(dest) == expected and fetched.bytes == sum(len(v) for v in expected.values())


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = _session(tmp_path / "store")
    assert main([uri, str(tmp_path / "out"), "--layout", "hta", "-q"]) == 0
    assert "2 file(s)" in capsys.readouterr().out
    assert main([f"file://{tmp_path}/store/ns/nothing-here", str(tmp_path / "none")]) == 2  # not a folder
    (tmp_path / "empty").mkdir()
    assert main([f"file://{tmp_path}/empty", str(tmp_path / "none")]) == 1
    assert main(["gs://bucket/x", str(tmp_path / "none")]) == 2


def test_the_console_script_has_the_subcommand(tmp_path: Path) -> None:
    uri = _session(tmp_path / "store")
    out = subprocess.run(
        [sys.executable, "-m", "stepscope_cli.main", "fetch", uri, str(tmp_path / "cli"), "--layout", "tensorboard"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "cli" / "run-1234abcd" / "rank1.pt.trace.json.gz").read_bytes() == b"trace1"


def test_the_merged_layout_brings_only_the_merged_trace_flat(tmp_path: Path) -> None:
    """`stepscope fetch NAME --merged` (layout merged): report/merged/merged.pt.trace.json.gz alone, as DEST's only
    file, so that Perfetto and TraceAnalysis(trace_dir=DEST) open it."""
    uri = _session(tmp_path / "store")
    session = parse_storage_uri(uri)
    key = merged_trace_key(session)
    Path(key).parent.mkdir(parents=True, exist_ok=True)
    Path(key).write_bytes(b"merged")
    fetched = fetch_session(LocalStore(), session, tmp_path / "out", FetchLayout.MERGED)
    assert _tree(tmp_path / "out") == {MERGED_TRACE_FILE: b"merged"} and fetched.bytes == 6
    assert key.endswith("/report/merged/merged.pt.trace.json.gz")
