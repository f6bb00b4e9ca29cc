"""The verdict of a job with no slow rank says where its step goes: the largest step phases, by their median share
over the ranks."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.step_makeup import phase_shares, step_makeup
from stepscope_contract.report import Cause, RankReport, StepPhases, StepStats
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


def _rank(rank: int, **phases: float) -> RankReport:
    return RankReport(rank=rank, phases=StepPhases(**phases))


def test_the_largest_phases_by_their_median_share() -> None:
    ranks = [
        _rank(0, forward=20, backward=40, communication_wait=30, other=10),
        _rank(1, forward=20, backward=40, communication_wait=35, other=5),
        _rank(2, forward=10, backward=10, communication_wait=80),  # one odd rank does not move the median
    ]
    shares = phase_shares(ranks)
    assert shares["backward"] == pytest.approx(0.4) and shares["communication_wait"] == pytest.approx(0.35)
    assert step_makeup(ranks) == "backward 40%, blocked in collectives 35%, forward 20%"


def test_small_phases_and_ranks_without_phases_are_left_out() -> None:
    assert step_makeup([_rank(0, forward=95, other=5)]) == "forward 95%"
    assert step_makeup([RankReport(rank=0)]) == ""


def test_balanced_and_single_rank_verdicts_say_where_the_step_goes() -> None:
    d = diagnose(synthetic_job(JobShape(world_size=4, steps=6), seed=3))
    assert d.slow_ranks == []
    assert d.verdict.startswith("No slow rank: the 4 analysed ranks are balanced (steps take ")
    assert "backward 4" in d.verdict and "blocked in collectives" in d.verdict, d.verdict
    one = diagnose(synthetic_job(JobShape(world_size=1, steps=6), seed=3))
    assert one.verdict.startswith("One rank analysed: no other rank to compare it with (steps take ")
    assert "backward" in one.verdict


def test_traces_without_step_spans_say_so_instead_of_a_step_time() -> None:
    """A profile without prof.step() has no ProfilerStep#N spans: the excess is over the recorded window and the
    verdict says there is no step time (it used to read 'steps take 0.0 ms')."""
    ranks = synthetic_job(JobShape(world_size=4, steps=6), slow_rank=1, cause=Cause.HOST, extra_us=40_000, seed=2)
    windowed = [r.model_copy(update={"steps": StepStats(), "step_phases": []}) for r in ranks]
    d = diagnose(windowed)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(1, Cause.HOST)], d.verdict
    assert "ms over the recorded window" in d.verdict and "no ProfilerStep#N spans" in d.verdict
    assert "steps take 0.0 ms" not in d.verdict and d.median_step_us == 0.0 and d.expected_step_us is None
    assert d.estimated_speedup is not None and d.estimated_speedup > 1.0
    balanced = diagnose([r.model_copy(update={"steps": StepStats(), "step_phases": []}) for r in synthetic_job()])
    assert balanced.verdict.startswith("No slow rank: the 8 analysed ranks are balanced (the recorded window takes ")
