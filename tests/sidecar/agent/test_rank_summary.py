"""The rank summary a sidecar makes beside its trace: the analyzer's command, at a lower priority, within an
address-space limit and a deadline; anything that goes wrong leaves no summary (the analysis parses the trace) and
never fails the rank; switched off, nothing runs. The summary goes up after the rank's files and before its
manifest, carrying that manifest (a summary that is not a JSON object goes up as it is), and an upload failure of
the summary is not the rank's."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import (
    MANIFEST_FILE,
    RANK_SUMMARY_FILE,
    TRACE_FILE,
    parse_storage_uri,
    rank_artifact_key,
)
from stepscope_contract.wire import CaptureState
from stepscope_sidecar.rank_summary import RankSummary, SummarySettings
from stepscope_sidecar.uploader import UploadStats, upload_rank
from stepscope_storage.local import LocalStore

pytestmark = pytest.mark.integration

GLOO = Path(__file__).resolve().parents[2] / "analyzer_job" / "fixtures" / "gloo_2rank_rank1.pt.trace.json.gz"


def _rank_dir(tmp_path: Path) -> Path:
    rank_dir = tmp_path / "rank-1"
    rank_dir.mkdir()
    (rank_dir / TRACE_FILE).write_bytes(GLOO.read_bytes())
    return rank_dir


def _fake(tmp_path: Path, body: str) -> tuple[str, ...]:
    script = tmp_path / "fake_summary.py"
    script.write_text(body)
    return (sys.executable, str(script))


def test_the_analyzers_summary_at_a_lower_priority(tmp_path: Path) -> None:
    rank_dir = _rank_dir(tmp_path)
    running = RankSummary.start(rank_dir / TRACE_FILE, 1, SummarySettings(nice=7), "cap-1")
    assert running is not None
    out = running.finish()
    assert out == rank_dir / RANK_SUMMARY_FILE
    node = NodeSummary.model_validate_json(out.read_text())
    assert node.rank == 1 and node.summary is not None and node.summary.steps.count > 0
    trace = (rank_dir / TRACE_FILE).read_bytes()  # bound to the trace it was made from, and to the capture
    assert (node.trace_sha256, node.trace_size, node.capture_id) == (
        hashlib.sha256(trace).hexdigest(),
        len(trace),
        "cap-1",
    )
    probe = _fake(tmp_path, "import os, sys, pathlib; pathlib.Path(sys.argv[-1]).write_text(str(os.nice(0)))")
    niced = RankSummary.start(rank_dir / TRACE_FILE, 1, SummarySettings(nice=7, command=probe), "cap-1")
    assert niced is not None and niced.finish() is not None
    assert int((rank_dir / RANK_SUMMARY_FILE).read_text()) >= 7  # below the training's priority


def test_what_goes_wrong_leaves_no_summary(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rank_dir = _rank_dir(tmp_path)
    trace = rank_dir / TRACE_FILE
    hog = _fake(tmp_path, "b = bytearray(512 * 1024 * 1024)")
    over = RankSummary.start(trace, 1, SummarySettings(memory_mib=64, command=hog), "cap-1")
    assert over is not None and over.finish() is None  # refused memory beyond its limit
    slow = RankSummary.start(
        trace, 1, SummarySettings(timeout_s=0.5, command=_fake(tmp_path, "import time; time.sleep(30)")), "cap-1"
    )
    assert slow is not None and slow.finish() is None
    assert "ran past" in caplog.text and "failed (exit 1)" in caplog.text
    assert RankSummary.start(trace, 1, SummarySettings(enabled=False), "cap-1") is None
    assert RankSummary.start(trace, 1, SummarySettings(command=("/nonexistent/python",)), "cap-1") is None
    assert not SummarySettings.from_env({"STEPSCOPE_RANK_SUMMARY": "off"}).enabled
    assert SummarySettings.from_env({}).enabled  # the analyzer is installed here


def test_the_summary_goes_up_before_the_manifest(tmp_path: Path) -> None:
    rank_dir = _rank_dir(tmp_path)
    summary = rank_dir / RANK_SUMMARY_FILE
    summary.write_text("{}")
    session = parse_storage_uri(f"file://{tmp_path}/store/ns/s-1234abcd")
    manifest = RankManifest(capture_id="c-1", namespace="ns", session="s", rank=1, state=CaptureState.UPLOADED)
    order: list[str] = []

    def then() -> Path:
        order.append("summary asked for")
        assert Path(rank_artifact_key(session, 1, TRACE_FILE)).is_file()  # the trace is up first
        return summary

    artifacts = upload_rank(LocalStore(), session, manifest, [rank_dir / TRACE_FILE], rank_dir, deadline=1e18,
                            stats=UploadStats(), then=then)  # fmt: skip
    key = Path(rank_artifact_key(session, 1, RANK_SUMMARY_FILE))
    assert [a.uri.rsplit("/", 1)[-1] for a in artifacts] == ["rank1.pt.trace.json.gz", "summary.json", "manifest.json"]
    assert order == ["summary asked for"]
    carried = json.loads(key.read_text())["manifest"]  # the manifest goes up inside the summary too
    assert RankManifest.model_validate(carried).model_copy(update={"upload_attempts": 2}) == manifest.model_copy(
        update={"upload_finished_at": None}
    )
    assert str(key).endswith("/traces/rank1/summary.json")
    assert json.loads(Path(rank_artifact_key(session, 1, MANIFEST_FILE)).read_text())["state"] == "uploaded"
    summary.unlink()  # gone before its upload: logged, the rank still uploads
    manifest2 = manifest.model_copy(update={"rank": 2})
    uploaded = upload_rank(LocalStore(), session, manifest2, [rank_dir / TRACE_FILE], rank_dir, deadline=1e18,
                           stats=UploadStats(), then=lambda: summary)  # fmt: skip
    assert uploaded[-1].uri.endswith("/traces/rank2/manifest.json")


def test_a_summary_that_is_not_a_json_object_goes_up_as_it_is(tmp_path: Path) -> None:
    rank_dir = _rank_dir(tmp_path)
    summary = rank_dir / RANK_SUMMARY_FILE
    session = parse_storage_uri(f"file://{tmp_path}/store/ns/s-1234abcd")
    manifest = RankManifest(capture_id="c-1", namespace="ns", session="s", rank=1, state=CaptureState.UPLOADED)
    for text in ("not json", "[1]"):
        summary.write_text(text)
        upload_rank(LocalStore(), session, manifest, [rank_dir / TRACE_FILE], rank_dir, deadline=1e18,
                    stats=UploadStats(), then=lambda: summary)  # fmt: skip
        assert Path(rank_artifact_key(session, 1, RANK_SUMMARY_FILE)).read_text() == text
    node = NodeSummary(analyzer_version="1.0", top_n=50, rank=1, error="refused")
    summary.write_text(" \n" + node.model_dump_json(by_alias=True, exclude_none=True, indent=1) + "\n")
    upload_rank(LocalStore(), session, manifest, [rank_dir / TRACE_FILE], rank_dir, deadline=1e18,
                stats=UploadStats(), then=lambda: summary)  # fmt: skip
    carried = NodeSummary.model_validate_json(Path(rank_artifact_key(session, 1, RANK_SUMMARY_FILE)).read_text())
    assert carried.model_copy(update={"manifest": None}) == node
    assert carried.manifest is not None and carried.manifest.capture_id == "c-1" and carried.manifest.rank == 1
