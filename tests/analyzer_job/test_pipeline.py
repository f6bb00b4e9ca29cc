"""The pipeline on local folders: the shared HTA corpus as a plain folder (duplicate ranks renumbered, every
rank analysed) and a session folder with ranks missing below the announced world size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope_analyzer.pipeline import discover, reduce_outcomes, summarize_all
from stepscope_analyzer.storage_io import LocalStore, location_of
from stepscope_contract.storage import MANIFEST_FILE, TRACE_FILE, rank_artifact_key, rank_location

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_shared_hta_folder_is_analysed_rank_by_rank(shared_traces: Path) -> None:
    loc = location_of(str(shared_traces))
    layout = discover(LocalStore(), loc)
    assert not layout.session
    names = sorted(i.name for i in layout.inputs)
    assert names == sorted(p.name for p in shared_traces.glob("*.json.gz"))  # golden/ is not read
    report = reduce_outcomes(summarize_all(LocalStore(), layout))
    assert all(r.status.value == "ok" for r in report.ranks), [r.error for r in report.ranks]
    assert len({r.rank for r in report.ranks}) == len(names)  # rank 0 claimed thrice: renumbered, noted
    assert any("already holds" in e.message for e in report.errors)
    assert any("different world sizes" in e.message for e in report.errors)
    large = next(r for r in report.ranks if r.trace_uri and r.trace_uri.endswith("nccl_2rank_rank1_large.json.gz"))
    assert large.device == "cuda" and large.kernel_time > 0


@pytest.mark.parametrize("layout_of", ["traces", "first", "both"])
def test_session_folder_reports_missing_ranks(tmp_path: Path, gloo_traces: list[bytes], layout_of: str) -> None:
    """The sidecars' layout (traces/rank<R>.pt.trace.json.gz, traces/rank<R>/manifest.json), the first layout
    (ranks/<R>/...) of sessions written before it, and a folder holding one rank in each."""
    session = location_of(f"file://{tmp_path}")
    for rank in (0, 1):
        first = layout_of == "first" or (layout_of == "both" and rank == 1)

        def put(name: str, data: bytes, rank: int = rank, first: bool = first) -> None:
            path = Path(rank_location(session, rank).key(name) if first else rank_artifact_key(session, rank, name))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        put(TRACE_FILE, gloo_traces[rank])
        manifest = {"captureId": "c", "namespace": "n", "session": "s", "rank": rank, "state": "uploaded",
                    "node": f"node-{rank}", "meta": {"captureId": "c", "rank": rank, "worldSize": 4, "pid": 1,
                                                     "stepsRequested": 4, "stepsCaptured": 4}}  # fmt: skip
        put(MANIFEST_FILE, json.dumps(manifest).encode())
    layout = discover(LocalStore(), session)
    assert layout.session and [i.rank for i in layout.inputs] == [0, 1]
    assert all(i.trace_key and i.manifest_key for i in layout.inputs)
    report = reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=True)
    assert [(r.rank, r.status.value) for r in report.ranks] == [(0, "ok"), (1, "ok"), (2, "missing"), (3, "missing")]
    assert [r.node for r in report.ranks[:2]] == ["node-0", "node-1"]
    assert report.world_size == 4
    assert report.diagnosis.slow_ranks[0].rank == 1 and report.diagnosis.slow_ranks[0].node == "node-1"
