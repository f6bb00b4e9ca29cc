"""Intermittent stalls: a few steps far longer on one rank alone are found, where they are and what they cost the
job per step; one odd step, stalls shared round the ranks, a slower median, or steps that do not line up are not.
And the diagnosis built on it: the slow rank lists its stalls, and the job's numbers come from the mean step."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.evidence import every_nth
from stepscope_analyzer.diagnosis.intermittent import rank_excess, stalls, step_excess
from stepscope_contract.report import Cause
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit

STEP = 50_000.0


def _job(ranks: int, steps: int, seed: int = 0, noise: float = 0.02) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {r: STEP * (1.0 + rng.normal(0.0, noise, steps)) for r in range(ranks)}


def _find(samples: dict[int, np.ndarray]) -> list:
    return stalls(samples, samples, threshold=3.5, spike_floor_us=0.5 * STEP, noise_floor_us=0.005 * STEP)


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_a_rank_stalling_every_few_steps_is_found_with_its_steps_and_cost(ranks: int) -> None:
    samples = _job(ranks, 9, seed=ranks)
    samples[1][[1, 4, 7]] += 120_000.0  # a checkpoint every third step
    found = _find(samples)
    assert [s.rank for s in found] == [1]
    stall = found[0]
    assert stall.stalled == (1, 4, 7) and stall.steps == 9 and stall.spikes == 3
    assert stall.spike_excess_us == pytest.approx(120_000.0, rel=0.05)
    assert stall.mean_excess_us == pytest.approx(3 * 120_000.0 / 9, rel=0.1)  # what the job pays per step
    assert stall.share == pytest.approx(1.0) and stall.z > 10


def test_one_odd_step_is_a_hiccup_not_a_pattern() -> None:
    samples = _job(4, 8)
    samples[2][5] += 200_000.0
    assert _find(samples) == []


def test_stalls_that_land_on_every_rank_in_turn_are_the_machine_not_a_rank() -> None:
    samples = _job(4, 8, seed=3)
    for step, rank in enumerate([0, 1, 2, 3, 0, 1, 2, 3]):
        samples[rank][step] += 60_000.0  # a noisy neighbour stretches whichever rank it lands on
    assert _find(samples) == []


def test_a_rank_slower_in_most_steps_is_left_to_the_median_test() -> None:
    samples = _job(4, 8, seed=4)
    samples[3][[0, 1, 2, 3, 5, 6]] += 80_000.0
    assert _find(samples) == []


def test_spikes_below_the_stall_floor_are_not_stalls() -> None:
    samples = _job(4, 8, seed=5, noise=0.001)
    samples[0][[2, 6]] += 0.3 * STEP  # clear against the noise, but not a stall of half a step
    assert _find(samples) == []


def test_steps_that_do_not_line_up_are_not_compared() -> None:
    samples = _job(3, 8)
    samples[2] = samples[2][:7]
    samples[1][[1, 5]] += 100_000.0
    assert step_excess(samples) is None and _find(samples) == []  # no numbers to line them up by
    assert rank_excess(samples, 1).size == 0
    assert step_excess(_job(3, 3)) is None  # too few steps for a pattern


def test_every_nth() -> None:
    assert every_nth((1, 4, 7)) == 3
    assert every_nth([0, 2]) == 2
    assert every_nth((1, 2, 5)) is None
    assert every_nth((3,)) is None


@pytest.mark.parametrize("world", [2, 4, 8])
def test_diagnosis_names_the_stalling_rank_and_quotes_the_mean_step(world: int) -> None:
    shape = JobShape(world_size=world, steps=8)
    ranks = synthetic_job(shape, extra={world - 1: {"host": 150_000.0}}, every=4, seed=world)
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(world - 1, Cause.HOST)], d.verdict
    slow = d.slow_ranks[0]
    assert slow.stalled_steps == [0, 4] and slow.steps_recorded == 8
    assert slow.stall_us == pytest.approx(150_000.0, rel=0.1)
    assert slow.excess_us == pytest.approx(2 * 150_000.0 / 8, rel=0.15)  # averaged over every step
    assert d.mean_step_us > 1.3 * d.median_step_us
    replayed = next(w for w in d.what_if if w.kind == "like_peers")  # replayed from the mean step
    assert d.expected_step_us == pytest.approx(replayed.step_us, abs=0.1)
    assert d.expected_step_us == pytest.approx(d.mean_step_us - slow.excess_us, rel=0.03)
    assert d.estimated_speedup == pytest.approx(d.mean_step_us / d.expected_step_us)
    assert "stalls of ~150 ms in 2 of 8 recorded steps (every 4 steps)" in d.verdict
    assert "on average (median" in d.verdict
    stall = next(e for e in slow.evidence if e.metric.endswith(", intermittent"))
    assert "stalls in 2 of 8 recorded steps (every 4 steps" in stall.detail


def test_a_steady_straggler_is_not_called_intermittent_and_balanced_jobs_have_no_stalls() -> None:
    steady = diagnose(synthetic_job(JobShape(world_size=4, steps=8), slow_rank=2, cause=Cause.HOST, extra_us=30_000))
    assert [s.rank for s in steady.slow_ranks] == [2] and steady.slow_ranks[0].stalled_steps is None
    assert "stalls" not in steady.verdict and "on average" not in steady.verdict
    for seed in range(20):
        balanced = diagnose(synthetic_job(JobShape(world_size=4, steps=8), noise=0.05, seed=seed))
        assert balanced.slow_ranks == [], balanced.verdict


def test_a_stall_split_between_compute_and_host_is_found_on_own_time_and_charged_to_the_larger_part() -> None:
    shape = JobShape(world_size=4, steps=8)  # a step of ~80 ms: neither part alone is half a step
    ranks = synthetic_job(shape, extra={1: {"host": 25_000.0, "compute": 20_000.0}}, every=4, seed=9)
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(1, Cause.HOST)], d.verdict
    assert d.slow_ranks[0].stalled_steps == [0, 4]
    assert d.slow_ranks[0].stall_us == pytest.approx(45_000.0, rel=0.15)


def test_steps_line_up_by_their_numbers_when_ranks_started_recording_at_different_steps() -> None:
    samples = _job(3, 9, seed=11)
    samples[1] = samples[1][:8]  # rank 1 started one step later and recorded one step fewer
    numbers = {0: tuple(range(10, 19)), 1: tuple(range(11, 19)), 2: tuple(range(10, 19))}
    samples[1][[1, 4, 7]] += 120_000.0  # steps #12, #15, #18: a checkpoint every third step
    found = stalls(samples, samples, 3.5, 0.5 * STEP, 0.005 * STEP, numbers=numbers)
    assert [s.rank for s in found] == [1]
    stall = found[0]
    assert stall.stalled == (1, 4, 7) and stall.numbers == (12, 15, 18) and stall.steps == 8
    excess = rank_excess(samples, 1, numbers)
    assert excess.size == 8 and excess[4] == pytest.approx(120_000.0, rel=0.1)
    assert _find(samples) == []  # by position alone they do not line up (8 steps against 9)


def test_a_rank_slower_in_every_step_whose_excess_wanders_across_the_floor_does_not_stall() -> None:
    samples = _job(4, 8, seed=6)
    samples[2] += np.asarray([30, 22, 18, 28, 20, 29, 17, 23]) * 1000.0  # 3 steps above half a step, all slower
    assert _find(samples) == []
