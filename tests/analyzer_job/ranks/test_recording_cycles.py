"""Successive recording cycles of one rank (torch.profiler's schedule with `repeat`) are told from two processes
claiming one rank: the latest full cycle of each is kept (not a last one the end of profiling cut short), the
others are named in a note."""

from __future__ import annotations

import pytest

from stepscope_analyzer.ranks.recording_cycles import cycles_left_out, worker_of
from stepscope_contract.report import RankReport, StepStats

pytestmark = pytest.mark.unit


def _trace(
    rank: int, start: float, end: float, numbers: list[int], fingerprint: str = "gloo/2/0:default_pg[2]"
) -> RankReport:
    return RankReport(
        rank=rank,
        captured_from_unix_s=start,
        captured_to_unix_s=end,
        job_fingerprint=fingerprint,
        trace_uri=f"file:///t/r{rank}-{start}.pt.trace.json.gz",
        steps=StepStats(count=len(numbers), numbers=numbers),
    )


def test_the_latest_cycle_of_each_rank_is_kept() -> None:
    traces = [
        (0, 0, _trace(0, 100.0, 100.5, [2, 3, 4, 5])),
        (1, 1, _trace(1, 100.0, 100.5, [2, 3, 4, 5])),
        (2, 0, _trace(0, 100.7, 101.2, [8, 9, 10, 11])),
        (3, 1, _trace(1, 100.7, 101.2, [8, 9, 10, 11])),
    ]
    notes = cycles_left_out(traces)
    assert sorted(notes) == [0, 1]
    assert "an earlier recording cycle of rank 0 (ProfilerStep #2-#5)" in notes[0]
    assert "the latest cycle (ProfilerStep #8-#11) is analysed" in notes[0]


def test_overlapping_recordings_of_one_rank_are_two_processes_not_cycles() -> None:
    traces = [(0, 0, _trace(0, 100.0, 100.5, [2, 3])), (1, 0, _trace(0, 100.2, 100.8, [2, 3]))]
    assert cycles_left_out(traces) == {}


def test_traces_of_other_jobs_or_without_times_are_not_cycles() -> None:
    other_job = [(0, 0, _trace(0, 100.0, 100.5, [1])), (1, 0, _trace(0, 101.0, 101.5, [1], fingerprint="gloo/4/x"))]
    assert cycles_left_out(other_job) == {}
    untimed = RankReport(rank=0, trace_uri="file:///t/a.json")
    assert cycles_left_out([(0, 0, untimed), (1, 0, _trace(0, 101.0, 101.5, [1]))]) == {}


def test_a_worker_without_a_rank_is_known_by_its_file_name() -> None:
    assert worker_of("file:///t/host_1234.1795700325452707443.pt.trace.json.gz") == "host_1234"
    assert worker_of("host-a_77.12.pt.trace.json") == "host-a_77"
    assert worker_of("rank0.json.gz") is None
    traces = [(0, "host_1", _trace(0, 10.0, 10.2, [2, 3])), (1, "host_1", _trace(0, 10.5, 10.7, [6, 7]))]
    assert "an earlier recording cycle of worker host_1 (ProfilerStep #2-#3)" in cycles_left_out(traces)[0]


def test_another_process_or_a_recording_much_later_is_not_a_cycle() -> None:
    first = _trace(0, 100.0, 100.5, [2, 3]).model_copy(update={"trace_uri": "file:///t/host_1.1.pt.trace.json.gz"})
    other_pid = _trace(0, 100.7, 101.2, [8, 9]).model_copy(update={"trace_uri": "file:///t/host_2.2.pt.trace.json.gz"})
    assert cycles_left_out([(0, 0, first), (1, 0, other_pid)]) == {}
    unnamed = _trace(0, 100.0, 100.5, [2, 3]).model_copy(update={"trace_uri": "file:///t/rank0.pt.trace.json.gz"})
    much_later = _trace(0, 7300.0, 7300.5, [2, 3]).model_copy(update={"trace_uri": "file:///t/later-rank0.json"})
    assert cycles_left_out([(0, 0, unnamed), (1, 0, much_later)]) == {}
    soon = _trace(0, 101.0, 101.5, [8, 9]).model_copy(update={"trace_uri": "file:///t/rank0-again.json"})
    assert list(cycles_left_out([(0, 0, unnamed), (1, 0, soon)])) == [0]


def test_a_last_cycle_cut_short_by_the_end_of_profiling_is_not_the_one_analysed() -> None:
    # schedule(wait=1, warmup=1, active=8) with the default repeat=0 and a loop of 12 steps: a full cycle, then a
    # trace holding ProfilerStep#12 alone when the profiler exits
    traces = [
        (0, 0, _trace(0, 100.0, 100.4, [2, 3, 4, 5, 6, 7, 8, 9])),
        (1, 0, _trace(0, 100.5, 100.51, [12])),
        (2, 1, _trace(1, 100.0, 100.4, [2, 3, 4, 5, 6, 7, 8, 9])),
        (3, 1, _trace(1, 100.5, 100.51, [12])),
    ]
    notes = cycles_left_out(traces)
    assert sorted(notes) == [1, 3]
    assert "a recording cycle of rank 0 cut short (ProfilerStep #12: fewer steps than its cycle of 8" in notes[1]
    assert "the latest full cycle (ProfilerStep #2-#9) is analysed" in notes[1]
    three = [  # two full cycles, then one cut short
        (0, 0, _trace(0, 100.0, 100.2, [2, 3, 4, 5, 6, 7, 8, 9])),
        (1, 0, _trace(0, 100.3, 100.5, [12, 13, 14, 15, 16, 17, 18, 19])),
        (2, 0, _trace(0, 100.6, 100.61, [22])),
    ]
    notes = cycles_left_out(three)
    assert sorted(notes) == [0, 2] and "an earlier recording cycle of rank 0" in notes[0]
    assert "the latest full cycle (ProfilerStep #12-#19) is analysed" in notes[0]
