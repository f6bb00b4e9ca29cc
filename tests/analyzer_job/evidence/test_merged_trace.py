"""The merged trace built from ranks' events (evidence.merged_trace): clocks that differ by seconds come out aligned
on the ends of the collectives, within the skew it reports; the recorded steps only; each rank's GPU streams apart
from its host threads; at most MAX_EVENTS events, the caps counted; the chosen ranks of a large job."""

from __future__ import annotations

from typing import Any

import pytest

from stepscope_analyzer.evidence import merged_trace
from stepscope_analyzer.evidence.files import merged_ranks
from stepscope_analyzer.evidence.merged_trace import TID_GPU_BASE, RankTrace, anchors, merge
from stepscope_contract.report import Cause, Diagnosis, RankReport, Report, SlowRank

pytestmark = pytest.mark.unit


def rank_events(clock: float, late_ms: float, steps: int = 4, gpu: bool = False) -> list[dict[str, Any]]:
    """A rank whose clock reads `clock` µs at the job's instant 0; each 100 ms step ends in an all-reduce that ends
    at 90 ms job time on every rank (it starts later on a late rank)."""
    out: list[dict[str, Any]] = [{"ph": "X", "name": "before the window", "pid": 7, "tid": 7, "ts": clock - 5e5,
                                  "dur": 10}]  # fmt: skip
    for k in range(steps):
        t0 = clock + k * 100_000.0
        out.append({"ph": "X", "name": f"ProfilerStep#{k}", "cat": "user_annotation", "pid": 7, "tid": 7, "ts": t0,
                    "dur": 99_000})  # fmt: skip
        out.append({"ph": "X", "name": "gloo:all_reduce", "pid": 7, "tid": 8, "ts": t0 + 60_000 + late_ms * 1000,
                    "dur": 30_000 - late_ms * 1000})  # fmt: skip
        if gpu:
            out.append({"ph": "X", "name": "sgemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": t0 + 1000, "dur": 50})
    out.append({"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "gloo worker"}})
    out.append({"ph": "s", "name": "flow", "pid": 7, "tid": 7, "ts": clock + 10, "id": 1})
    return out


def test_clocks_seconds_apart_come_out_aligned_on_the_collective_ends() -> None:
    ranks = [RankTrace(0, "rank 0 (p0)", rank_events(1e9, 0)), RankTrace(1, "rank 1", rank_events(1e9 + 3e6, 20)),
             RankTrace(2, "rank 2", rank_events(5e8, 0, gpu=True))]  # fmt: skip
    document, info = merge(ranks, step_index=2)
    assert info.offsets_us == {"0": 0.0, "1": -3e6, "2": 5e8} and info.skew_us == pytest.approx(0.0, abs=1e-3)
    events = document["traceEvents"]
    per_rank = [anchors([e for e in events if e["pid"] == r]) for r in range(3)]
    assert per_rank[1] == pytest.approx(per_rank[0], abs=0.01) and per_rank[2] == pytest.approx(per_rank[0], abs=0.01)
    assert not [e for e in events if e["name"] == "before the window" or e["ph"] == "s"]
    assert {e["args"]["name"] for e in events if e["name"] == "process_name"} == {"rank 0 (p0)", "rank 1", "rank 2"}
    kernels = [e for e in events if e["name"] == "sgemm"]
    assert kernels and all(e["pid"] == 2 and e["tid"] >= TID_GPU_BASE for e in kernels)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads[(1, 8)] == "gloo worker" and threads[(2, kernels[0]["tid"])] == "GPU 0 stream 7"
    assert info.row_ts_us["0"] == pytest.approx(200_000.0)  # step 2 of rank 0, from the trace's first event


def test_the_events_are_bounded_and_the_rest_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(merged_trace, "MAX_EVENTS", 10)
    ranks = [RankTrace(r, f"rank {r}", rank_events(0.0, 0, steps=6)) for r in range(2)]
    document, info = merge(ranks)
    assert sum(1 for e in document["traceEvents"] if e["ph"] != "M") == 10
    assert info.events_left_out == 2 * 12 - 10


def test_a_large_job_merges_its_named_ranks_and_their_nearest_peers() -> None:
    ranks = [RankReport(rank=r) for r in range(100)]
    slow = SlowRank(rank=40, cause=Cause.HOST, confidence=0.9)
    report = Report.model_validate({"generated_at": "2026-01-01T00:00:00Z", "ranks": ranks,
                                    "diagnosis": Diagnosis(verdict="x", slow_ranks=[slow])})  # fmt: skip
    chosen = merged_ranks(report)
    assert len(chosen) == 16 and 40 in chosen and max(abs(r - 40) for r in chosen) <= 8
    small = report.model_copy(update={"ranks": ranks[:6]})
    assert merged_ranks(small) == list(range(6))
