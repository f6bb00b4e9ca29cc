"""Several slow ranks' shares of their combined replayed gain: they add up to it, a rank that saves nothing in any
order gets nothing, two ranks alike share alike, and too few or too many ranks are not shared out."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis.gain_shares import MAX_SHARED, GainOf, gain_shares

pytestmark = pytest.mark.unit


def _slowest_holds_the_step(excess: dict[int, float]) -> GainOf:
    """A data-parallel step: the slowest rank's excess is the step's; fixing a set leaves the slowest of the rest."""

    def gain_of(fixed: list[int]) -> float:
        left = [v for r, v in excess.items() if r not in fixed]
        return max(excess.values()) - max(left, default=0.0)

    return gain_of


def test_the_shares_add_up_to_the_gain_of_fixing_every_rank() -> None:
    shares = gain_shares([2, 5], _slowest_holds_the_step({2: 30.0, 5: 20.0}))
    assert shares == {2: pytest.approx(20.0), 5: pytest.approx(10.0)}  # (10 + 30) / 2 and (0 + 20) / 2
    three = gain_shares([1, 2, 3], _slowest_holds_the_step({1: 9.0, 2: 9.0, 3: 3.0}))
    assert sum(three.values()) == pytest.approx(9.0)
    assert three[1] == pytest.approx(three[2]) and three[2] > three[3]


def test_a_rank_that_never_adds_to_the_saving_gets_nothing() -> None:
    shares = gain_shares([0, 1], lambda fixed: 12.0 if 0 in fixed else 0.0)
    assert shares == {0: pytest.approx(12.0), 1: pytest.approx(0.0)}


def test_one_rank_or_too_many_are_not_shared_out() -> None:
    assert gain_shares([3], lambda fixed: 1.0) == {}
    assert gain_shares(list(range(MAX_SHARED + 1)), lambda fixed: 1.0) == {}
