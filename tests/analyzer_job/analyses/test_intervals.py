"""Interval arithmetic against a brute-force reference on an integer grid."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.analyses import intervals

pytestmark = pytest.mark.unit


def _grid(ts: np.ndarray, end: np.ndarray, size: int) -> np.ndarray:
    covered = np.zeros(size, dtype=bool)
    for s, e in zip(ts.astype(int), end.astype(int), strict=True):
        covered[s:e] = True
    return covered


@pytest.mark.parametrize("seed", range(20))
def test_merge_union_and_intersection(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a_ts = rng.integers(0, 500, 40).astype(float)
    a_end = a_ts + rng.integers(0, 30, 40)
    b_ts = rng.integers(0, 500, 25).astype(float)
    b_end = b_ts + rng.integers(0, 60, 25)
    ua = intervals.merge(a_ts, a_end)
    ub = intervals.merge(b_ts, b_end)
    assert intervals.length(*ua) == _grid(a_ts, a_end, 600).sum()
    assert np.all(ua[0][1:] > ua[1][:-1])  # disjoint, sorted, touching ones merged
    both = _grid(a_ts, a_end, 600) & _grid(b_ts, b_end, 600)
    assert intervals.intersection_length(ua, ub) == both.sum()


def test_touching_intervals_merge_like_hta() -> None:
    s, e = intervals.merge(np.array([0.0, 10.0, 25.0]), np.array([10.0, 20.0, 30.0]))
    assert s.tolist() == [0.0, 25.0] and e.tolist() == [20.0, 30.0]


def _cells(u: intervals.Set, size: int) -> np.ndarray:
    return _grid(u[0], u[1], size)


def _random_set(rng: np.random.Generator, n: int) -> intervals.Set:
    ts = rng.integers(0, 500, n).astype(float)
    return intervals.merge(ts, ts + rng.integers(0, 40, n))


@pytest.mark.parametrize("seed", range(20))
def test_subtract_and_intersect_match_the_grid(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    a, b = _random_set(rng, 30), _random_set(rng, 30)
    minus, both = intervals.subtract(a, b), intervals.intersect(a, b)
    assert np.array_equal(_cells(minus, 600), _cells(a, 600) & ~_cells(b, 600))
    assert np.array_equal(_cells(both, 600), _cells(a, 600) & _cells(b, 600))
    for u in (minus, both):  # disjoint and sorted, touching pieces merged
        assert np.all(u[0] < u[1]) and np.all(u[0][1:] > u[1][:-1])


def test_by_first_level_is_subtracting_the_earlier_levels_one_by_one() -> None:
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 14))
        ts = rng.integers(0, 30, n).astype(np.float64)
        end = ts + rng.integers(0, 8, n)  # zero-length ones too
        level = rng.integers(0, 4, n).astype(np.int64)
        taken = intervals.empty()
        owned = intervals.by_first_level(ts, end, level, 4)
        for lvl in range(4):
            part = intervals.subtract(intervals.merge(ts[level == lvl], end[level == lvl]), taken)
            taken = intervals.union(taken, part)
            assert intervals.length(*owned[lvl]) == intervals.length(*part)
            assert np.all(owned[lvl][1] > owned[lvl][0]) and np.all(owned[lvl][0][1:] > owned[lvl][1][:-1])


def test_by_first_level_gives_an_inverted_interval_no_time() -> None:
    # a sub-microsecond kernel after HTA's rounding (ceil the start, floor the end) ends before it starts
    owned = intervals.by_first_level(np.array([5.0, 0.0]), np.array([4.0, 10.0]), np.array([0, 1], dtype=np.int64), 2)
    assert intervals.length(*owned[0]) == 0.0 and intervals.length(*owned[1]) == 10.0


@pytest.mark.parametrize("seed", range(20))
def test_nesting_and_ending_orders_are_lexsorts(seed: int) -> None:
    """By start the longer first, by end the shorter first, ties in both in their given order: as np.lexsort,
    on times with many ties (a parent and its first child start together) and with -0.0 and fractions."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    starts = rng.integers(0, 40, n).astype(np.float64) + rng.choice([0.0, -0.0, 0.5, 0.25], n)
    lengths = rng.integers(0, 6, n).astype(np.float64) * rng.choice([1.0, 0.5], n)
    ends = starts + lengths
    assert np.array_equal(intervals.nesting_order(starts, lengths), np.lexsort((-lengths, starts)))
    assert np.array_equal(intervals.ending_order(ends, lengths), np.lexsort((lengths, ends)))
