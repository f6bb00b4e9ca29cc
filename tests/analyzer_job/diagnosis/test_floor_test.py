"""The call-floor comparison of CPU ranks: a rank whose op calls at their least take longer than the others' in
most calls stands out; one op alone does not decide; floors that differ between a rank's even and odd steps (work
that varies per step) raise the noise until nothing stands out; ranks without floors compare nothing; with three
peers or more, the spread of their own ratios is a second measure of the noise."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis.floor_test import MIN_CALLS, floor_effects
from stepscope_contract.report import Bottleneck, CallFloors, RankReport
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit

CALLS = [f"aten::op{i}#0" for i in range(40)]


def _floors(scale: np.ndarray, split: float = 0.0, seed: int = 0) -> CallFloors:
    rng = np.random.default_rng(seed)
    base = np.linspace(50.0, 2_000.0, len(CALLS)) * scale * rng.uniform(0.97, 1.03, len(CALLS))
    return CallFloors(
        calls=CALLS,
        floor_us=base.tolist(),
        even_us=(base * (1.0 + split)).tolist(),
        odd_us=base.tolist(),
        steps=8,
    )


def _ranks(floors: list[CallFloors | None]) -> list[RankReport]:
    ranks = synthetic_job(JobShape(world_size=len(floors), steps=8), noise=0.02, seed=1)
    return [r.model_copy(update={"call_floors": f}) for r, f in zip(ranks, floors, strict=True)]


def test_a_rank_with_more_work_in_most_calls_stands_out() -> None:
    scale = np.where(np.arange(len(CALLS)) % 4 == 0, 1.0, 2.0)  # three calls in four do twice the work
    effects = floor_effects(_ranks([_floors(np.ones(40), seed=s) for s in range(3)] + [_floors(scale, seed=9)]))
    assert effects[3].ratio == pytest.approx(2.0, rel=0.05)
    assert effects[3].stands_out(1.4, 4.0, 3.0)
    assert not any(effects[r].stands_out(1.4, 4.0, 3.0) for r in range(3))
    assert effects[3].calls == len(CALLS)


def test_one_slow_op_does_not_decide() -> None:
    scale = np.ones(40)
    scale[-1] = 10.0  # the largest call alone, ten times slower
    effects = floor_effects(_ranks([_floors(np.ones(40), seed=1), _floors(scale, seed=2), _floors(np.ones(40))]))
    assert effects[1].ratio < 1.1


def test_floors_that_differ_between_a_ranks_own_steps_are_noise() -> None:
    twice = np.full(40, 2.0)
    effects = floor_effects(_ranks([_floors(np.ones(40), split=0.3), _floors(twice, split=0.3)]))
    assert effects[1].ratio == pytest.approx(2.0, rel=0.05)
    assert effects[1].noise == pytest.approx(np.log(1.3), rel=0.05)
    assert not effects[1].stands_out(1.4, 4.0, 3.0)


def test_nothing_is_compared_without_floors_on_every_rank_or_enough_common_calls() -> None:
    assert floor_effects(_ranks([_floors(np.ones(40)), None])) == {}
    few = CallFloors(calls=CALLS[: MIN_CALLS - 1], floor_us=[100.0] * (MIN_CALLS - 1),
                     even_us=[100.0] * (MIN_CALLS - 1), odd_us=[100.0] * (MIN_CALLS - 1), steps=8)  # fmt: skip
    assert floor_effects(_ranks([few, few])) == {}


def _counted(floors: CallFloors, calls_per_step: list[float], steps: int = 8) -> dict[str, object]:
    """A rank's floors with its top functions counting each op's calls over `steps` steps."""
    ops = [c.rpartition("#")[0] for c in floors.calls]
    tops = [
        Bottleneck(name=op, category="cpu_op", count=round(n * steps))
        for op, n in zip(ops, calls_per_step, strict=True)
    ]
    return {"call_floors": floors, "top_functions": tops}


def test_a_rank_that_makes_more_calls_at_the_same_cost_per_call_stands_out() -> None:
    """A layer applied twice: the same floor per call, twice the calls of three ops in four. Work is calls x time per
    call, so its ratio is its call ratio; the others' stays 1."""
    ranks = synthetic_job(JobShape(world_size=4, steps=8), noise=0.02, seed=1)
    twice = np.where(np.arange(len(CALLS)) % 4 == 0, 1.0, 2.0)
    counts = [np.ones(len(CALLS))] * 3 + [twice]
    ranks = [r.model_copy(update=_counted(_floors(np.ones(40), seed=i), c.tolist())) for i, (r, c) in
             enumerate(zip(ranks, counts, strict=True))]  # fmt: skip
    effects = floor_effects(ranks)
    expected = float(
        np.dot(twice, np.linspace(50.0, 2_000.0, len(CALLS))) / np.linspace(50.0, 2_000.0, len(CALLS)).sum()
    )
    assert effects[3].call_ratio == pytest.approx(expected, rel=0.05)
    assert effects[3].per_call == pytest.approx(1.0, abs=0.05)
    assert effects[3].ratio == pytest.approx(expected, rel=0.08) and effects[3].stands_out(1.4, 4.0, 3.0)
    assert all(not effects[r].stands_out(1.4, 4.0, 3.0) for r in range(3))
    assert all(effects[r].call_ratio == pytest.approx(1.0) for r in range(3))


def test_with_three_peers_or_more_their_own_spread_is_a_second_measure_of_the_noise() -> None:
    """Every rank's halves differ by 30% (a loaded machine's few steps): the split-half noise hides a rank whose
    calls take 1.25x the others', its three peers' ratios, within a few percent of each other, do not; a peer that
    strays as far as 1.15x is spread enough to hide it again."""
    tight = [_floors(np.ones(40), split=0.3, seed=s) for s in range(3)]
    effects = floor_effects(_ranks([*tight, _floors(np.full(40, 1.25), split=0.3, seed=9)]))
    assert effects[3].ratio == pytest.approx(1.25, rel=0.03)
    assert not effects[3].stands_out(1.4, 4.0, float("inf"))  # by the split-half noise alone
    spread = effects[3].peer_spread
    assert spread is not None and spread == pytest.approx(np.log(1.05), rel=0.01)  # the peers agree: the least spread
    assert effects[3].stands_out(1.4, 4.0, 3.0)
    assert not any(effects[r].stands_out(1.4, 4.0, 3.0) for r in range(3))  # each has rank 3 among its peers

    strays = [*tight[:2], _floors(np.full(40, 1.15), split=0.3, seed=2)]
    effects = floor_effects(_ranks([*strays, _floors(np.full(40, 1.25), split=0.3, seed=9)]))
    assert not effects[3].stands_out(1.4, 4.0, 3.0)


def test_fewer_than_three_peers_have_no_spread_to_measure() -> None:
    effects = floor_effects(_ranks([_floors(np.ones(40), seed=s) for s in range(2)] + [_floors(np.full(40, 2.0))]))
    assert all(e.peer_spread is None for e in effects.values())
    assert not effects[2].stands_out(1.4, float("inf"), 0.0)
