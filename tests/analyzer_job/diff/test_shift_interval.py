"""The Hodges-Lehmann shift and its Moses interval: critical counts as in the published tables, the exact and normal
paths agree where they meet, a pure shift is recovered, the interval covers the true shift as often as it claims,
and samples too small for the level give no interval."""

from __future__ import annotations

import math
import random

import pytest

from stepscope_analyzer.diff.shift_interval import (
    critical_count,
    exact_count,
    hodges_lehmann,
    normal_count,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("m", "n", "alpha", "expected"),
    [
        # Mann-Whitney lower critical values + 1 (Hollander & Wolfe, Table A.6; any two-sided table)
        (10, 10, 0.05, 24),
        (8, 8, 0.05, 14),
        (5, 5, 0.10, 5),
        (4, 4, 0.05, 1),
        (3, 3, 0.10, 1),
        (6, 9, 0.05, 11),
        (3, 3, 0.05, 0),  # P(U = 0) = 1/20 > 0.025: no 95% interval from 3 and 3 values
        (0, 5, 0.10, 0),
    ],
)
def test_critical_counts_match_the_tables(m: int, n: int, alpha: float, expected: int) -> None:
    assert critical_count(m, n, alpha) == expected
    if m and n:
        assert critical_count(n, m, alpha) == expected


@pytest.mark.parametrize(("m", "n"), [(40, 60), (100, 100), (20, 200)])
def test_exact_and_normal_counts_agree_where_they_meet(m: int, n: int) -> None:
    for alpha in (0.05, 0.10):
        assert abs(exact_count(m, n, alpha) - normal_count(m, n, alpha)) <= 1


def test_large_samples_use_the_normal_approximation() -> None:
    assert critical_count(200, 200, 0.10) == normal_count(200, 200, 0.10)


def test_a_pure_shift_is_recovered() -> None:
    base = [float(x) for x in range(1, 13)]
    shift = hodges_lehmann(base, [x + 3.0 for x in base], 0.90)
    assert shift.estimate == pytest.approx(3.0)
    assert shift.low is not None and shift.high is not None
    assert shift.low < 3.0 < shift.high
    assert shift.pairs == 144


def test_swapping_the_sides_negates_the_shift() -> None:
    rng = random.Random(3)
    b = [rng.gauss(0, 1) for _ in range(9)]
    c = [rng.gauss(0.5, 1) for _ in range(11)]
    ahead, back = hodges_lehmann(b, c, 0.9), hodges_lehmann(c, b, 0.9)
    assert back.estimate == pytest.approx(-ahead.estimate)
    assert back.low == pytest.approx(-(ahead.high or 0.0))
    assert back.high == pytest.approx(-(ahead.low or 0.0))


@pytest.mark.parametrize("confidence", [0.80, 0.90, 0.95])
def test_the_interval_covers_the_true_shift_as_often_as_it_claims(confidence: float) -> None:
    """Skewed (log-normal) step times, a true log-ratio of 0.2: the share of intervals that hold it."""
    rng = random.Random(11)
    trials, hits = 400, 0
    for _ in range(trials):
        b = [math.log(rng.lognormvariate(3.0, 0.3)) for _ in range(10)]
        c = [math.log(rng.lognormvariate(3.0, 0.3)) + 0.2 for _ in range(12)]
        s = hodges_lehmann(b, c, confidence)
        assert s.low is not None and s.high is not None
        hits += s.low <= 0.2 <= s.high
    # the exact interval is conservative (coverage >= its level); 3 standard errors of slack for 400 trials
    se = math.sqrt(confidence * (1 - confidence) / trials)
    assert hits / trials >= confidence - 3 * se


def test_too_few_values_give_no_interval() -> None:
    s = hodges_lehmann([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], 0.95)
    assert s.estimate == pytest.approx(1.0)
    assert s.low is None and s.high is None


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        hodges_lehmann([], [1.0], 0.9)
    with pytest.raises(ValueError, match="confidence"):
        hodges_lehmann([1.0], [1.0], 1.0)
