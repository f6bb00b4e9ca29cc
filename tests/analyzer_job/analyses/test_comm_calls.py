"""A rank's communication calls as its summary keeps them (analyses/comm_calls.py): NCCL kernels with their
collective, process group and step (public HTA test data), gloo work items with the pipeline direction of each
send and receive read from the work beside it (a recorded pp4 x dp2 job), and the bound: whole steps only."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from stepscope_analyzer.analyses.comm_calls import op_key
from stepscope_analyzer.analyses.rank_summary import summarize_trace
from stepscope_contract.report import MAX_COMM_CALLS, CommCalls

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PP4 = FIXTURES / "pipeline_jobs" / "cpu-pp4dp2-slow-worker"


def _calls(trace: Path | bytes) -> CommCalls:
    report = summarize_trace(trace if isinstance(trace, bytes) else trace.read_bytes())
    assert report.comm_calls is not None
    return report.comm_calls


def test_op_names_of_every_source_compare() -> None:
    assert {op_key(n) for n in ("all_reduce", "AllReduce", "allreduce")} == {"allreduce"}
    assert op_key("recv_") == "recv"


def test_nccl_kernels_keep_their_collective_group_and_step() -> None:
    calls = _calls(FIXTURES / "hta" / "nccl_2rank_rank0.json.gz")  # public HTA test data (see its README)
    assert set(calls.ops) == {"allreduce", "broadcast"} and calls.groups == ["0:default_pg"]
    assert set(calls.group_index) == {0} and set(calls.peer) == {-1}
    assert len(calls.step) == len(calls.dur_us) == len(calls.op_index) and min(calls.step) >= 0
    assert all(d > 0 for d in calls.dur_us)


def _ranks_by_stage() -> dict[int, list[CommCalls]]:
    out: dict[int, list[CommCalls]] = {}
    for trace in sorted(PP4.glob("*.pt.trace.json.gz")):
        rank = json.loads(gzip.decompress(trace.read_bytes()))["distributedInfo"]["rank"]
        out.setdefault(rank // 2, []).append(_calls(trace))  # ranks 2s and 2s+1 hold stage s
    return out


def test_a_middle_stage_sends_and_receives_both_ways_and_each_call_says_which() -> None:
    """gloo names no peer. A middle stage's receives are half activations (from the previous stage, followed by
    forward work) and half gradients (from the next, followed by backward work); its sends likewise."""
    for stage, ranks in _ranks_by_stage().items():
        for calls in ranks:
            ways = Counter(
                (calls.ops[o], t)
                for o, t in zip(calls.op_index, calls.toward, strict=True)
                if calls.ops[o] != "allreduce"
            )
            if stage in (1, 2):
                assert ways[("recv", -1)] == ways[("recv", 1)] == ways[("send", -1)] == ways[("send", 1)] > 0, ways
            assert set(calls.peer) == {-1}


def _trace(steps: int, calls_per_step: int) -> bytes:
    events = []
    for s in range(steps):
        at = s * 10_000.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                       "ts": at, "dur": 9_000.0})  # fmt: skip
        events.extend(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "gloo:all_reduce",
                "pid": 1,
                "tid": 2,
                "ts": at + 10.0 + 5.0 * k,
                "dur": 4.0,
            }
            for k in range(calls_per_step)
        )
    return json.dumps({"traceEvents": events}).encode()


def test_the_calls_kept_are_whole_steps_within_the_bound() -> None:
    per_step = MAX_COMM_CALLS // 3 + 1  # three steps do not fit, two do
    calls = _calls(_trace(5, per_step))
    assert len(calls.dur_us) == 2 * per_step
    assert Counter(calls.step) == {0: per_step, 1: per_step}
