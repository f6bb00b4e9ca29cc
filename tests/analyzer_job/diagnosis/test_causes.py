"""The causes table: one row per cause, and every stage reads its words from there."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis.causes import CAUSES, cause_row, row_for_cost
from stepscope_analyzer.diagnosis.detector_table import DETECTORS
from stepscope_analyzer.diagnosis.diagnose import diagnose
from stepscope_analyzer.diagnosis.rank_costs import COSTS
from stepscope_analyzer.diagnosis.verdict import next_steps
from stepscope_contract.report import Cause, RankReport, SlowRank, StepPhases, StepStats

pytestmark = pytest.mark.unit


def test_every_cause_has_exactly_one_row() -> None:
    assert sorted(r.cause for r in CAUSES) == sorted(Cause)
    assert all(cause_row(c).cause is c for c in Cause)


def test_every_compared_cost_has_a_row_and_its_phases_exist() -> None:
    for cost in COSTS:
        assert row_for_cost(cost).cost == cost
    phases = set(StepPhases.model_fields)
    for row in CAUSES:
        assert set(row.phases) <= phases
        assert row.label and row.verdict and "{r}" in row.next_step
    covered = {p for row in CAUSES for p in row.phases}
    assert covered == phases, "every step phase belongs to one cause's cost"


def test_next_steps_come_from_the_table() -> None:
    slow = [SlowRank(rank=3, cause=c, confidence=0.9) for c in (Cause.COMPUTE, Cause.HOST)]
    steps = next_steps(slow, [], 0)
    assert steps[:2] == [cause_row(Cause.COMPUTE).next_step.format(r=3), cause_row(Cause.HOST).next_step.format(r=3)]


def test_a_cause_that_takes_over_a_cost_names_a_rank_time() -> None:
    """`takes_over` lists compared costs, and the device time that decides it is a RankReport field."""
    for row in CAUSES:
        assert row.takes_over <= set(COSTS)
        assert bool(row.takes_over) == bool(row.device_time)
        assert not row.device_time or row.device_time in RankReport.model_fields
    assert cause_row(Cause.MEMORY).takes_over == {"compute", "host"}


def _contended_rank(rank: int, other_us: float, ops_us: float, wait_us: float) -> RankReport:
    """A CPU rank of 5 steps that all waited for a CPU (dilation 20, as on a machine with ten times more runnable
    threads than cores): forward/backward/optimizer 3 ms, `other_us` outside the step's work, of which `ops_us` of
    tensor ops, `wait_us` blocked in collectives."""
    phase = StepPhases(data_loading=100.0, forward=1000.0, backward=1700.0, optimizer=300.0,
                       communication_wait=wait_us, other=other_us)  # fmt: skip
    step = sum(phase.model_dump().values())
    durations = [step * (1 + 0.01 * k) for k in range(5)]
    return RankReport(
        rank=rank, device="cpu", steps=StepStats(count=5, median_us=durations[2], mean_us=step, durations_us=durations),
        step_phases=[phase] * 5, phases=phase, step_dilation=[20.0] * 5, step_ops_outside_work=[ops_us] * 5,
        window_us=5 * step, kernel_time=5 * step, host_time=5 * (100.0 + other_us),
    )  # fmt: skip


def test_tensor_ops_one_rank_alone_runs_are_compute_even_when_every_rank_waited_for_a_cpu() -> None:
    """The demo's compute variant on a machine under heavy load: the contention correction divides every rank's work
    by 20 and hides rank 2's 70 ms of matmuls after backward; its wall-clock host time stands out, it is tensor ops
    the other ranks do not run, and they wait for it: compute. A sleep of the same length there stays host time."""
    ranks = [_contended_rank(r, 70_000.0 if r == 2 else 300.0, 69_000.0 if r == 2 else 0.0,
                             30_000.0 if r == 2 else 98_000.0) for r in range(4)]  # fmt: skip
    slow = diagnose(ranks).slow_ranks
    assert [(s.rank, s.cause) for s in slow] == [(2, Cause.COMPUTE)]
    slept = [_contended_rank(r, 70_000.0 if r == 2 else 300.0, 0.0, 30_000.0 if r == 2 else 98_000.0) for r in range(4)]
    assert all(s.cause is not Cause.COMPUTE for s in diagnose(slept).slow_ranks)


def test_every_cause_is_found_by_exactly_one_detector_of_the_table() -> None:
    """The seam: each cause has its words (causes table) and one detector (detector table) that names it."""
    named = [c for row in DETECTORS for c in row.causes]
    assert sorted(named) == sorted(Cause)
    assert len({row.name for row in DETECTORS}) == len(DETECTORS)
