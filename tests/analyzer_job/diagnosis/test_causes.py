"""The causes table: one row per cause, and every stage reads its words from there."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis.causes import CAUSES, cause_row, row_for_cost
from stepscope_analyzer.diagnosis.rank_costs import COSTS
from stepscope_analyzer.diagnosis.verdict import next_steps
from stepscope_contract.report import Cause, RankReport, SlowRank, StepPhases

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
