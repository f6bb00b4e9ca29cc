"""The trigger conditions as pure functions over synthetic step series (tests/operator/step_series.py): a regression,
a straggler and a stall fire and say why; noisy balanced series never fire (400 of them, with bursts three times a
step); a burst shorter than the window, a straggler too small to matter, steps taken during a capture and a
regression the rolling baseline has absorbed do not fire either."""

from __future__ import annotations

import pytest
from step_series import job

from stepscope_contract.step_telemetry import RankSteps
from stepscope_contract.trigger import (
    Stall,
    StepTimeRegression,
    Straggler,
    StragglerMeasure,
    TriggerCondition,
    TriggerConditions,
)
from stepscope_operator.triggers.conditions import evaluate, job_step_series, regression, stall, straggler

pytestmark = pytest.mark.unit

ALL = TriggerConditions(straggler=Straggler(), step_time_regression=StepTimeRegression(), stall=Stall(seconds=60))


@pytest.mark.parametrize("sigma", [0.1, 0.25, 0.4])
def test_noisy_balanced_series_never_fire(sigma: float) -> None:
    for seed in range(400 if sigma == 0.25 else 100):
        verdict = evaluate(job(seed, sigma=sigma, bursts=0.08), ALL)
        assert verdict.findings == (), (seed, verdict.findings)
        assert verdict.notes == ()


def test_a_straggler_is_named_by_its_own_time() -> None:
    ranks = job(1, slow_rank=2, slow_ms=60.0, slow_from=250)  # its own part doubles and more for the last 50 steps
    found, note = straggler(ranks, Straggler())
    assert note == "" and found is not None
    assert found.condition is TriggerCondition.STRAGGLER and found.ranks == (2,)
    assert found.message.startswith("rank 2's own time over its last 20 steps is ")
    assert "the median of the other ranks" in found.message and "(+50%)" in found.message


def test_in_a_synchronous_job_step_time_cannot_tell_the_straggler() -> None:
    ranks = job(1, slow_rank=2, slow_ms=60.0, slow_from=250)
    found, _ = straggler(ranks, Straggler(measure=StragglerMeasure.STEP_TIME))
    assert found is None  # every rank's step waits for rank 2: that is why ownTime is the default


def test_step_time_finds_a_straggler_whose_steps_are_longer() -> None:
    ranks = job(2)
    ranks[1] = ranks[1].model_copy(update={"duration_ms": [d * 2 for d in ranks[1].duration_ms]})
    found, _ = straggler(ranks, Straggler(measure=StragglerMeasure.STEP_TIME))
    assert found is not None and found.ranks == (1,) and "step time" in found.message


def test_a_burst_shorter_than_the_window_is_not_a_straggler() -> None:
    ranks = job(3, slow_rank=0, slow_ms=200.0, slow_from=285, slow_steps=4)  # 4 very slow steps of the last 20
    assert straggler(ranks, Straggler())[0] is None


def test_a_straggler_that_costs_little_of_a_step_is_none() -> None:
    ranks = job(4, slow_rank=1, slow_ms=2.5, slow_from=200)  # +100% of a tiny own part is still a tiny cost
    for r in ranks:
        r.backward_ms[:] = [d - (2.5 if r.rank == 1 and i >= 200 else 0.0) - 1.0 for i, d in enumerate(r.duration_ms)]
    assert straggler(ranks, Straggler())[0] is None


def test_a_straggler_needs_two_ranks_with_enough_steps() -> None:
    ranks = job(5, steps=10)
    found, note = straggler(ranks, Straggler(steps=20))
    assert found is None and note == "straggler: 0 rank(s) with 20 normal steps, 2 needed"


def test_a_regression_fires_and_the_rolling_baseline_absorbs_it() -> None:
    spec = StepTimeRegression(thresholdPercent=30, steps=20, baselineSteps=200)
    slowed = job(6, steps=300, slow_from=270, job_slowdown=2.0)  # the last 30 steps take twice as long
    found, note = regression(slowed, spec)
    assert note == "" and found is not None and found.condition is TriggerCondition.STEP_TIME_REGRESSION
    assert found.message.startswith("the job's median step over its last 20 steps is ")
    assert "the 200 steps before" in found.message
    quieter = job(6, steps=300, sigma=0.1, slow_from=270, job_slowdown=1.6)  # +60% stands out of 10% noise
    assert regression(quieter, spec)[0] is not None
    lasting = job(6, steps=600, slow_from=100, job_slowdown=2.0)  # slow for 500 steps: the new normal
    assert regression(lasting, spec)[0] is None
    short = job(6, steps=300, slow_from=288, job_slowdown=2.0)  # 12 slow steps of 20: not three quarters
    assert regression(short, spec)[0] is None


def test_a_regression_needs_history() -> None:
    found, note = regression(job(7, steps=60), StepTimeRegression())
    assert found is None and note == "stepTimeRegression: 60 normal steps of the job, 120 needed"


def test_steps_taken_during_a_capture_are_left_out() -> None:
    ranks = job(8, steps=300, slow_from=280, job_slowdown=3.0, profiled=tuple(range(280, 300)))
    assert regression(ranks, StepTimeRegression())[0] is None
    assert len(job_step_series(ranks, 220, 100)) == 220  # the window slides back over the normal steps


def test_the_job_series_is_the_median_over_ranks_aligned_at_the_newest_step() -> None:
    a = RankSteps(rank=0, duration_ms=[1.0, 2.0, 3.0, 4.0], backward_ms=[0.0] * 4, profiled=[False] * 4)
    b = RankSteps(rank=1, duration_ms=[9.0, 20.0, 30.0], backward_ms=[0.0] * 3, profiled=[False] * 3)
    c = RankSteps(rank=2, duration_ms=[5.0, 6.0, 7.0], backward_ms=[0.0] * 3, profiled=[False] * 3)
    assert job_step_series([a, b, c], 10, 3) == [5.0, 6.0, 7.0]  # a: 2, 3, 4 (its oldest step is left out)


def test_a_stall_names_the_ranks_that_stopped_and_ignores_finished_processes() -> None:
    ranks = job(9, since_last=0.2)
    ranks[1] = ranks[1].model_copy(update={"seconds_since_last_step": 95.0})
    ranks[3] = ranks[3].model_copy(update={"seconds_since_last_step": 130.0})
    found = stall(ranks, Stall(seconds=90))
    assert found is not None and found.ranks == (1, 3)
    assert found.message == "no step on ranks 1,3 for 130 s (stall.seconds 90)"
    ranks[1] = ranks[1].model_copy(update={"closed": True})
    ranks[3] = ranks[3].model_copy(update={"closed": True})
    assert stall(ranks, Stall(seconds=90)) is None  # exited: finished or crashed, not stalled
    fresh = [RankSteps(rank=0, steps_total=0, seconds_since_last_step=None)]
    assert stall(fresh, Stall(seconds=5)) is None  # no step yet: still starting


def test_the_most_specific_finding_comes_first() -> None:
    ranks = job(10, steps=300, slow_rank=2, slow_ms=60.0, slow_from=260)  # a straggler that slows the job too
    verdict = evaluate(ranks, ALL)
    assert [f.condition for f in verdict.findings] == [
        TriggerCondition.STRAGGLER,
        TriggerCondition.STEP_TIME_REGRESSION,
    ]
    ranks[0] = ranks[0].model_copy(update={"seconds_since_last_step": 61.0})
    assert verdict.first is not None and evaluate(ranks, ALL).findings[0].condition is TriggerCondition.STALL
