"""Ranks analysed in worker processes give the same report as one process, bad traces included (each fails only
its own rank), the caller's limits reach the workers, and a worker lets a trace's bytes go once it has parsed
them."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope_analyzer import limits
from stepscope_analyzer.ranks.pipeline import discover, each_outcome, summarize_all
from stepscope_analyzer.ranks.storage_io import location_of
from stepscope_analyzer.ranks.trace_work import compute
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_analyzer.workers import rank_pool
from stepscope_analyzer.workers.rank_pool import Computed, Handed, Task, compute_all
from stepscope_contract.report import RankStatus, Report
from stepscope_storage import open_store

pytestmark = pytest.mark.integration


def _report(folder: Path, workers: int) -> Report:
    location = location_of(str(folder))
    store = open_store(location)
    outcomes = summarize_all(store, discover(store, location), workers=workers)
    return reduce_outcomes(outcomes)


def _comparable(report: Report) -> dict[str, Any]:
    return report.model_dump(mode="json", exclude={"analysis_seconds", "generated_at"})


def test_workers_give_the_serial_report_and_bad_traces_fail_alone(
    tmp_path: Path, gloo_traces: list[bytes], malformed_traces: dict[str, bytes]
) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank, data in enumerate(gloo_traces):
        (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(data)
    bad = ["truncated gzip", "invalid json", "truncated plain json"]
    for i, name in enumerate(bad, start=len(gloo_traces)):
        (folder / f"rank{i}.pt.trace.json.gz").write_bytes(malformed_traces[name])
    serial, pooled = _report(folder, 1), _report(folder, 2)
    assert _comparable(pooled) == _comparable(serial)
    statuses = {r.rank: r.status for r in pooled.ranks}
    assert statuses == {
        0: RankStatus.OK,
        1: RankStatus.OK,
        2: RankStatus.ERROR,
        3: RankStatus.ERROR,
        4: RankStatus.ERROR,
    }


def test_the_callers_limits_reach_the_workers(tmp_path: Path, gloo_traces: list[bytes]) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank, data in enumerate(gloo_traces):
        (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(data)
    with limits.override(max_steps=1):
        report = _report(folder, 2)
    assert all(r.status is RankStatus.ERROR and "max_steps" in (r.error or "") for r in report.ranks)


@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_outcomes_are_the_collected_ones(
    tmp_path: Path, gloo_traces: list[bytes], malformed_traces: dict[str, bytes], workers: int
) -> None:
    """The map step writes each rank's summary as it comes (each_outcome) instead of holding them all: the same
    outcomes as summarize_all, every rank once, a bad trace included."""
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank, data in enumerate(gloo_traces):
        (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(data)
    (folder / f"rank{len(gloo_traces)}.pt.trace.json.gz").write_bytes(malformed_traces["invalid json"])
    location = location_of(str(folder))
    store = open_store(location)
    layout = discover(store, location)
    streamed = {o.summary.rank: o.summary for o in each_outcome(store, layout, workers=workers)}
    collected = {o.summary.rank: o.summary for o in summarize_all(store, layout, workers=workers)}
    assert sorted(streamed) == list(range(len(gloo_traces) + 1))
    assert {r: s.model_dump(mode="json") for r, s in streamed.items()} == {
        r: s.model_dump(mode="json") for r, s in collected.items()
    }
    assert streamed[len(gloo_traces)].status is RankStatus.ERROR


def test_while_waiting_runs_once_after_the_first_tasks_are_handed_out(gloo_traces: list[bytes]) -> None:
    """`stepscope analyze` imports its reduce step there: the workers must already hold traces when it starts, and
    it runs once however many tasks follow, done by the time the results are."""
    pulled: list[int] = []
    seen: list[int] = []  # tasks pulled when it started
    done: list[int] = []
    results: list[int] = []

    def source() -> Iterator[Task]:
        for i in range(5):
            pulled.append(i)
            yield Task(i, gloo_traces[i % len(gloo_traces)], i, None)

    def hook() -> None:
        seen.append(len(pulled))
        done.append(1)

    for index, computed in compute_all(source(), work=compute, top_n=5, workers=2, while_waiting=hook):
        assert computed.error is None
        results.append(index)
    assert sorted(results) == list(range(5))
    assert len(seen) == 1 and done == [1]
    assert seen[0] >= 2  # both workers had a trace (one each, IN_FLIGHT_SPARE more at most)


def _beside(traces: list[bytes], count: int, hook: Callable[[], None]) -> Iterator[tuple[int, Computed]]:
    """`count` tasks of the recorded traces in a pool of two workers, `hook` as its while_waiting."""
    tasks = (Task(i, traces[i % len(traces)], i, None) for i in range(count))
    return compute_all(tasks, work=compute, top_n=5, workers=2, while_waiting=hook)


def test_while_waiting_runs_beside_the_results_not_before_them(gloo_traces: list[bytes]) -> None:
    """The results keep coming (and the next tasks keep going out) while it runs: a hook that waits for the first
    result sees it, which it never could if the results waited for the hook."""
    first_result = threading.Event()
    saw: list[bool] = []

    def hook() -> None:
        saw.append(first_result.wait(timeout=60))

    results = []
    for index, computed in _beside(gloo_traces, 4, hook):
        assert computed.error is None
        results.append(index)
        first_result.set()
    assert sorted(results) == list(range(4))
    assert saw == [True]


def test_a_failing_while_waiting_is_raised_once_the_results_are_in(gloo_traces: list[bytes]) -> None:
    def hook() -> None:
        raise ModuleNotFoundError("no module named 'the_reduce_step'")

    results = []
    with pytest.raises(ModuleNotFoundError, match="the_reduce_step"):
        for index, _ in _beside(gloo_traces, 3, hook):
            results.append(index)
    assert sorted(results) == [0, 1, 2]


@pytest.mark.parametrize(("workers", "calls"), [(2, 1), (1, 0)])
def test_summarize_all_passes_while_waiting_to_the_pool(
    tmp_path: Path, gloo_traces: list[bytes], workers: int, calls: int
) -> None:
    """Only the pool calls it (the serial path has nothing to overlap); an empty pool never does."""
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank, data in enumerate(gloo_traces):
        (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(data)
    location = location_of(str(folder))
    store = open_store(location)
    count: list[None] = []
    outcomes = summarize_all(
        store, discover(store, location), workers=workers, while_waiting=lambda: count.append(None)
    )
    assert len(outcomes) == len(gloo_traces)
    assert len(count) == calls
    assert list(compute_all(iter(()), work=compute, top_n=5, workers=2, while_waiting=lambda: count.append(None))) == []
    assert len(count) == calls


def test_a_handed_trace_is_taken_whole_and_gives_the_same_summary(gloo_traces: list[bytes]) -> None:
    """What lets a worker free the stored bytes before the analyses: the work takes them out of the hand-over (the
    only reference left), and what it computes from them is what the bytes themselves give."""
    handed = Handed(gloo_traces[0])
    taken = compute(handed, None, 0, 5, 1)
    assert handed.take() == b""
    direct = compute(gloo_traces[0], None, 0, 5, 1)
    assert taken.error is None and taken.summary is not None and direct.summary is not None
    assert taken.summary.model_dump(mode="json") == direct.summary.model_dump(mode="json")


def _whose(
    trace: bytes | Handed, fixed_rank: int | None, name_rank: int | None, top_n: int, cpus: int | None
) -> Computed:
    """A work function that tells which process ran the task."""
    return Computed(None, str(os.getpid()), fixed_rank)


def _dies_on_rank_two(
    trace: bytes | Handed, fixed_rank: int | None, name_rank: int | None, top_n: int, cpus: int | None
) -> Computed:
    """A work function whose process is killed (as for memory) on rank 2."""
    if fixed_rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return Computed(None, "analysed", fixed_rank)


def _tasks(count: int) -> Iterator[Task]:
    return (Task(i, b"", i, None) for i in range(count))


def test_a_worker_analyses_a_bounded_number_of_ranks_before_fresh_ones_take_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every task is run once, in pools of at most RANKS_PER_WORKER tasks per worker, each with workers of its own."""
    monkeypatch.setattr(rank_pool, "RANKS_PER_WORKER", 2)
    results = dict(compute_all(_tasks(9), work=_whose, top_n=5, workers=2))
    assert sorted(results) == list(range(9))
    per_process = Counter(c.error for c in results.values())
    assert max(per_process.values()) <= 2 * 2
    assert len(per_process) >= 3  # nine tasks, four to a pool: three pools
    assert str(os.getpid()) not in per_process


def test_a_worker_that_dies_fails_only_the_rank_that_killed_it() -> None:
    """The ranks in the pool when a worker dies are run again one at a time: only the rank that kills its own
    process is marked failed; the others, those after it included, are analysed."""
    results = dict(compute_all(_tasks(6), work=_dies_on_rank_two, top_n=5, workers=2))
    assert sorted(results) == list(range(6))
    assert {i: c.error for i, c in results.items()} == {
        0: "analysed",
        1: "analysed",
        2: "the process analysing this trace died (out of memory?)",
        3: "analysed",
        4: "analysed",
        5: "analysed",
    }


def _dies_on_rank_two_as_sent(
    trace: bytes | Handed, fixed_rank: int | None, name_rank: int | None, top_n: int, cpus: int | None
) -> Computed:
    """Says which bytes it got; its process is killed on rank 2's bytes as first sent."""
    data = trace.take() if isinstance(trace, Handed) else trace
    if fixed_rank == 2 and data == b"sent":
        os.kill(os.getpid(), signal.SIGKILL)
    return Computed(None, data.decode(), fixed_rank)


def test_a_sent_trace_leaves_the_caller_and_is_read_again_after_its_worker_died() -> None:
    """With a way to read it again, a task's bytes go to the worker inside the pickle and the calling process keeps
    no copy of them (its memory holds no trace a worker has); a task whose worker died is run with its bytes read
    again. Without one, the caller keeps its copy."""
    tasks = [Task(i, b"sent", i, None, again=lambda: b"read again") for i in range(6)]
    results = {i: c.error for i, c in compute_all(iter(tasks), work=_dies_on_rank_two_as_sent, top_n=5, workers=2)}
    assert results[2] == "read again"
    assert set(results.values()) <= {"sent", "read again"} and sorted(results) == list(range(6))
    assert [t.trace for t in tasks] == [b""] * 6
    kept = [Task(i, b"sent", i, None) for i in range(3)]
    assert dict(compute_all(iter(kept), work=_whose, top_n=5, workers=2)).keys() == {0, 1, 2}
    assert [t.trace for t in kept] == [b"sent"] * 3


def test_a_trace_that_cannot_be_read_again_is_that_ranks_error() -> None:
    def gone() -> bytes:
        raise OSError("the file is gone")

    tasks = [Task(i, b"sent", i, None, again=gone) for i in range(4)]
    results = {i: c.error for i, c in compute_all(iter(tasks), work=_dies_on_rank_two_as_sent, top_n=5, workers=2)}
    assert results[2] is not None and results[2].startswith("the trace could not be read again after its worker died")
    assert "the file is gone" in results[2]
