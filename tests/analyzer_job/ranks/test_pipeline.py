"""The pipeline on local folders: the HTA test traces (fixtures/hta) as a plain folder (duplicate ranks renumbered,
traces of different jobs told apart), traces of one job recorded at two times, a session folder with ranks missing below
the announced world size, traces gathered in subfolders, and traces that say no rank."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_contract.storage import MANIFEST_FILE, TRACE_FILE, rank_artifact_key, rank_location

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_hta_folder_is_analysed_rank_by_rank(hta_traces: Path) -> None:
    loc = location_of(str(hta_traces))
    layout = discover(LocalStore(), loc)
    assert not layout.session
    names = sorted(i.name for i in layout.inputs)
    assert names == sorted(p.name for p in hta_traces.glob("*.json.gz"))  # golden/ and the maker script are not read
    outcomes = summarize_all(LocalStore(), layout)
    assert all(o.summary.status.value == "ok" for o in outcomes), [o.summary.error for o in outcomes]
    report = reduce_outcomes(outcomes)
    assert len({r.rank for r in report.ranks}) == len(names)  # rank 0 claimed thrice: renumbered, noted
    assert any("already holds" in e.message for e in report.errors)
    # seven traces of five different jobs: the largest group is diagnosed, the others are named and left out
    foreign = [r for r in report.ranks if r.status.value == "error"]
    assert foreign and all("from a different job (world size" in (r.error or "") for r in foreign)
    assert any("traces of different jobs" in n for n in report.notes)
    assert "traces of different jobs" in report.diagnosis.verdict
    sampled = [r for r in report.ranks if r.trace_uri and "sampled_128rank" in r.trace_uri]
    assert [r.status.value for r in sampled] == ["ok", "ok"]  # the two ranks of the 128-rank job belong together
    assert report.diagnosis.ranks_analysed == 2 and report.diagnosis.ranks_expected == 128
    assert "only 2 of 128 ranks analysed" in report.diagnosis.verdict
    large = next(r for r in outcomes if (r.summary.trace_uri or "").endswith("nccl_2rank_rank1_large.json.gz"))
    assert large.summary.device == "cuda" and large.summary.kernel_time > 0


def test_one_job_recorded_twice_is_two_jobs(tmp_path: Path, gloo_traces: list[bytes]) -> None:
    """The same ranks recorded again two hours later: the second recording is another job's, and the verdict says
    so instead of comparing them."""
    for rank, data in enumerate(gloo_traces):
        (tmp_path / f"rank{rank}.pt.trace.json.gz").write_bytes(data)
        doc = json.loads(gzip.decompress(data))
        doc["baseTimeNanoseconds"] += 7200 * 10**9
        (tmp_path / f"later-rank{rank}.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    report = reduce_outcomes(summarize_all(LocalStore(), discover(LocalStore(), location_of(str(tmp_path)))))
    ok = sorted(r.rank for r in report.ranks if r.status.value == "ok")
    later = [r for r in report.ranks if r.status.value == "error"]
    assert len(ok) == 2 and len(later) == 2
    assert all("recorded 2.0 h apart" in (r.error or "") for r in later)
    assert "traces of different jobs" in report.diagnosis.verdict


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


def test_traces_gathered_in_subfolders_are_found(tmp_path: Path, gloo_traces: list[bytes]) -> None:
    for rank, data in enumerate(gloo_traces):
        (tmp_path / f"node-{rank}").mkdir()
        (tmp_path / f"node-{rank}" / f"host{rank}_{100 + rank}.17.pt.trace.json.gz").write_bytes(data)
    (tmp_path / "node-0" / "notes.json").write_text("{}")  # only *.pt.trace.json[.gz] files are read below
    layout = discover(LocalStore(), location_of(str(tmp_path)))
    assert sorted(i.name for i in layout.inputs) == ["node-0/host0_100.17.pt.trace.json.gz",
                                                     "node-1/host1_101.17.pt.trace.json.gz"]  # fmt: skip
    assert layout.notes == ["no trace directly in the folder: 2 trace file(s) found in its subfolders"]
    report = reduce_outcomes(summarize_all(LocalStore(), layout), notes=layout.notes)
    assert sorted(r.rank for r in report.ranks if r.status.value == "ok") == [0, 1]
    assert [s.rank for s in report.diagnosis.slow_ranks] == [1]  # the committed pair: rank 1 sleeps


def test_traces_that_say_no_rank_are_numbered_in_name_order_and_noted(tmp_path: Path, gloo_traces: list[bytes]) -> None:
    for name, data in zip(("b-worker.json", "a-worker.json"), gloo_traces, strict=True):
        trace = json.loads(gzip.decompress(data))
        del trace["distributedInfo"]
        (tmp_path / name).write_text(json.dumps(trace))
    layout = discover(LocalStore(), location_of(str(tmp_path)))
    report = reduce_outcomes(summarize_all(LocalStore(), layout), notes=layout.notes)
    assert sorted(r.rank for r in report.ranks) == [0, 1]
    uri_of = {r.rank: r.trace_uri or "" for r in report.ranks}
    assert uri_of[0].endswith("a-worker.json") and uri_of[1].endswith("b-worker.json")
    note = next(n for n in report.notes if "say no rank" in n)
    assert "a-worker.json as rank 0, b-worker.json as rank 1" in note
    assert report.diagnosis.slow_ranks and report.diagnosis.slow_ranks[0].rank == 0  # the sleeping rank, renumbered


def test_node_summaries_are_read_ahead_of_the_caller_by_a_bounded_window() -> None:
    """pool.map read every rank while the caller still held the first: at 4,096 ranks read from a fast disk that
    was up to every summary uncompacted at once (937 MB instead of ~530 MB for `stepscope analyze`)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from stepscope_analyzer.ranks.pipeline import read_ahead

    started: list[int] = []
    lock = threading.Lock()

    def work(item: int) -> int:
        with lock:
            started.append(item)
        return item * 10

    with ThreadPoolExecutor(4) as pool:
        results = read_ahead(pool, work, list(range(100)), 8)
        assert next(results) == 0
        pool.submit(lambda: None).result()  # let the pool catch up with what it was given
        assert len(started) <= 9  # the window, and the one submitted when the first was taken
        assert [0, *results] == [i * 10 for i in range(100)]
    assert sorted(started) == list(range(100))
