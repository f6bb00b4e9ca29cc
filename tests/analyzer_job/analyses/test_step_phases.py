"""Step phases on real CPU traces (the committed 2-rank gloo pair): the six phases add up to each step, the rank
that sleeps before its all_reduce shows it as host time outside the step's work (`other`, no annotation around it),
named by where it happens, and the rank that waits for it shows `communication_wait`; on a written trace, a
pipeline's point-to-point send in flight while the thread computes (gloo's span from the isend to its wait's end)
leaves that work its phase, and a tensor-parallel layer's wait for its group inside a functional collective is
communication, not the layer's work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stepscope_analyzer.analyses import summarize_trace
from stepscope_contract.report import RankReport

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SLEEP_US = 20_000.0


@pytest.fixture(scope="module")
def pair() -> tuple[RankReport, RankReport]:
    r0, r1 = (summarize_trace(FIXTURES / f"gloo_2rank_rank{i}.pt.trace.json.gz") for i in (0, 1))
    return r0, r1


def test_phases_add_up_to_each_step(pair: tuple[RankReport, RankReport]) -> None:
    for r in pair:
        assert r.phases is not None and len(r.step_phases) == r.steps.count == 4
        for phases, step in zip(r.step_phases, r.steps.durations_us, strict=True):
            assert math.isclose(sum(phases.model_dump().values()), step, rel_tol=1e-6)
        assert math.isclose(sum(r.phases.model_dump().values()), r.steps.mean_us, rel_tol=1e-6)
        assert r.phases.forward > 0 and r.phases.backward > 0 and r.phases.optimizer > 0


def test_an_unannotated_sleep_is_host_time_and_the_other_rank_waits(pair: tuple[RankReport, RankReport]) -> None:
    r0, r1 = pair
    assert r1.phases is not None and r0.phases is not None
    assert r1.phases.other >= 0.9 * SLEEP_US and r0.phases.other < 0.2 * SLEEP_US
    assert r0.phases.communication_wait >= 0.9 * SLEEP_US and r1.phases.communication_wait < 0.3 * SLEEP_US
    assert r1.host_time >= 0.9 * SLEEP_US * r1.steps.count
    gap = max((b for b in r1.top_functions if b.category == "host_gap"), key=lambda b: b.total_us)
    assert gap.total_us >= 0.9 * SLEEP_US * (r1.steps.count - 1)  # the first step may start elsewhere
    assert gap.name.startswith("host time between") and "c10d::allreduce_" in gap.name


def test_cpu_ranks_show_cpu_figures_and_no_gpu_ones(pair: tuple[RankReport, RankReport]) -> None:
    for r in pair:
        assert r.device == "cpu"
        assert r.gpu_utilization is None and r.idle_breakdown is None and r.idle_breakdown_by_stream == []
        assert r.cpu_utilization is not None and 0.0 < r.cpu_utilization < 1.0
        assert len(r.step_dilation) == r.steps.count and all(d >= 1.0 for d in r.step_dilation)
        assert r.captured_from_unix_s is not None and r.captured_to_unix_s is not None
        assert r.captured_to_unix_s > r.captured_from_unix_s
        assert r.job_fingerprint == "gloo/2/0:default_pg[2]"


def _op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def test_work_inside_a_point_to_point_send_in_flight_keeps_its_phase() -> None:
    """One 10 ms step: an isend's gloo:send span (1-8 ms) holds the thread's forward op (1.5-4.5 ms) and a backward
    op (5-7 ms), then its wait (7-8 ms); a blocking all_reduce call follows (8.5-9.5 ms). The work keeps its phase;
    the span's time with no op running (1-1.5, 4.5-5 and 7-8 ms) and the all_reduce are communication_wait."""
    events = [
        _op("ProfilerStep#0", 0.0, 10_000.0, cat="user_annotation"),
        _op("gloo:send", 1_000.0, 7_000.0, cat="user_annotation"),
        _op("aten::linear", 1_500.0, 3_000.0),
        _op("autograd::engine::evaluate_function: AddmmBackward0", 5_000.0, 2_000.0),
        _op("c10d::allreduce_", 8_500.0, 1_000.0),
        _op("ProfilerStep#1", 10_000.0, 1_000.0, cat="user_annotation"),
    ]
    report = summarize_trace(json.dumps({"traceEvents": events}).encode())
    phases = report.step_phases[0]
    assert phases.forward == pytest.approx(3_000.0) and phases.backward == pytest.approx(2_000.0)
    assert phases.communication_wait == pytest.approx(3_000.0)
    assert phases.other == pytest.approx(2_000.0)


def test_a_functional_collective_s_wait_is_communication_not_its_layer_s_work() -> None:
    """Five 10 ms steps, each a 3 ms `aten::linear` holding DTensor's `_c10d_functional::wait_tensor` (1.5 ms: the
    rank waits for its tensor-parallel group) and nothing else: the wait is communication_wait, and the layer's op
    at its least takes its own 1.5 ms, not the 3 ms it spans."""
    events = []
    for k in range(5):
        at = k * 10_000.0
        events += [
            _op(f"ProfilerStep#{k}", at, 10_000.0, cat="user_annotation"),
            _op("aten::linear", at + 1_000.0, 3_000.0),
            _op("_c10d_functional::wait_tensor", at + 2_000.0, 1_500.0),
        ]
    report = summarize_trace(json.dumps({"traceEvents": events}).encode())
    assert report.call_floors is not None and report.call_floors.total_us == pytest.approx(1_500.0)
    for phases in report.step_phases:
        assert phases.communication_wait == pytest.approx(1_500.0) and phases.forward + phases.other > 0
