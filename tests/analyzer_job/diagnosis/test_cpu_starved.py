"""A CPU rank that waits for a CPU while the others do not (a busy neighbour on its core) is named with cause
cpu_contention; ranks that all wait alike (an oversubscribed CPU), a stretch too small to be its own, and a job that
already has a straggler of its own costs (whose CPU burn starves its neighbours) are not."""

from __future__ import annotations

import re

import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_contract.report import Cause, RankReport
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit

SHAPE = JobShape(world_size=4, steps=8, device="cpu")


def _stretched(rank: RankReport, stretch_us: float, base: float = 1.0) -> RankReport:
    """`rank` whose compute per step holds `stretch_us` of waiting for a CPU (its dilation says so), on top of a
    stretch of `base` (its dilation without it)."""
    dilation = []
    for p in rank.step_phases:
        compute = p.forward + p.backward + p.optimizer
        own = (compute - stretch_us) / base
        dilation.append(compute / own)
    return rank.model_copy(update={"step_dilation": dilation})


def _job(extra_us: float, seed: int = 1) -> list[RankReport]:
    return synthetic_job(SHAPE, slow_rank=1, cause=Cause.COMPUTE, extra_us=extra_us, noise=0.03, seed=seed)


@pytest.mark.parametrize("seed", range(4))
def test_a_rank_that_alone_waits_for_a_cpu_is_named_with_cpu_contention(seed: int) -> None:
    ranks = _job(30_000.0, seed)
    ranks[1] = _stretched(ranks[1], 30_000.0)  # its extra 30 ms per step is all waiting for a CPU
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(1, Cause.CPU_CONTENTION)], d.verdict
    slow = d.slow_ranks[0]
    assert "its work waits for a CPU" in d.verdict and slow.excess_us > 20_000
    detail = next(e.detail for e in slow.evidence if e.metric == "wait for a CPU per step")
    assert re.search(r"stretched 1\.[45]\dx by waiting for a CPU \(the other ranks' 1\.00x\)", detail), detail
    assert any("kubectl top" in n for n in d.next_steps)


def test_every_rank_waiting_for_a_cpu_alike_is_not_one_ranks_neighbour() -> None:
    ranks = [_stretched(r, 0.0, base=1.8) for r in _job(30_000.0)]
    ranks[1] = _stretched(ranks[1], 30_000.0, base=1.8)  # oversubscribed: every rank waits, rank 1 a bit more
    assert diagnose(ranks).slow_ranks == []


def test_a_small_stretch_is_not_called_contention() -> None:
    ranks = _job(10_000.0)
    ranks[1] = _stretched(ranks[1], 10_000.0)  # dilation ~1.15: the scheduler's ordinary unevenness
    assert diagnose(ranks).slow_ranks == []


def test_a_straggler_of_its_own_costs_takes_precedence() -> None:
    ranks = synthetic_job(SHAPE, extra={1: {"compute": 30_000.0}, 3: {"host": 40_000.0}}, noise=0.03, seed=3)
    ranks[1] = _stretched(ranks[1], 30_000.0)  # starved by rank 3's CPU burn on a shared node
    assert [(s.rank, s.cause) for s in diagnose(ranks).slow_ranks] == [(3, Cause.HOST)]
