"""The planted fault's cost from a calibration's step times (stepscope_testing.planted_cost)."""

from __future__ import annotations

import pytest

from stepscope_testing.planted_cost import ORDER, armed, must_be_named, planted_cost

pytestmark = pytest.mark.unit


def test_the_fault_is_off_and_on_in_turn_so_a_drift_weighs_on_both() -> None:
    assert [armed(i) for i in range(8)] == [False, True, True, False] * 2
    assert sum(ORDER) * 2 == len(ORDER)


def test_the_cost_is_each_cycles_difference_whatever_the_drift() -> None:
    """Steps of 100 ms, 120 ms with the fault, on a machine getting slower by 2 ms a step: every cycle differs by
    20 ms, so the cost is 20 ms with no spread, and its share is of the step with the fault."""
    times = [(120.0 if armed(i) else 100.0) * 1000 + 2000 * i for i in range(12)]
    got = planted_cost(times)
    assert got["cost_us"] == got["low_us"] == got["high_us"] == pytest.approx(20_000.0)
    assert got["cost_share"] == pytest.approx(20_000.0 / got["steps_on_us"], abs=1e-4)
    assert got["cycles"] == 3


def test_noisy_cycles_widen_the_interval_around_the_mean() -> None:
    """Cycles differing by 10, 30 and 20 ms: the mean is 20 ms, two standard errors (of a spread of 10 ms over
    three cycles) either side."""
    cycles = [(100.0, 110.0, 110.0, 100.0), (100.0, 130.0, 130.0, 100.0), (100.0, 120.0, 120.0, 100.0)]
    got = planted_cost([t * 1000 for c in cycles for t in c])
    assert got["cost_us"] == pytest.approx(20_000.0)
    half = 2 * 10_000.0 / 3**0.5
    assert got["low_us"] == pytest.approx(20_000.0 - half, abs=0.1)
    assert got["high_us"] == pytest.approx(20_000.0 + half, abs=0.1)


def test_a_fault_the_job_does_not_pay_for_costs_nothing() -> None:
    got = planted_cost([100_000.0, 101_000.0, 99_000.0, 100_000.0])
    assert got["cost_us"] == 0.0 and got["cost_share"] == 0.0


def test_less_than_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one cycle"):
        planted_cost([100_000.0, 120_000.0])


def test_a_fault_must_be_named_only_where_its_whole_interval_clears_the_floor() -> None:
    def cost(low: float, high: float) -> dict[str, float]:
        return {"low_share": low, "high_share": high}

    assert must_be_named(cost(0.05, 0.09), 0.05) is True
    assert must_be_named(cost(-0.01, 0.049), 0.05) is False
    assert must_be_named(cost(0.03, 0.08), 0.05) is None
