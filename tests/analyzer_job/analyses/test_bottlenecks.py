"""Per-name times computed for every name at once equal a loop over the names (the merge, the exposed part), by the
native kernel and by numpy."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_analyzer.analyses import bottlenecks, interval_kernels, intervals
from stepscope_analyzer.analyses.bottlenecks import NameTime, per_name

loop = bottlenecks._per_name_loop

pytestmark = pytest.mark.unit


def _by_loop(name_id: np.ndarray, ts: np.ndarray, end: np.ndarray, compute: intervals.Set) -> list[NameTime]:
    out = []
    cover = intervals.Coverage(*compute)
    for name in sorted(set(name_id.tolist())):
        sel = name_id == name
        s, e = ts[sel], np.maximum(end[sel], ts[sel])
        merged = intervals.merge(s, e)
        length = intervals.length(*merged)
        out.append(NameTime(name, int(sel.sum()), float(np.sum(e - s)), length, length - cover.intersection(merged)))
    return out


@contextmanager
def _native(on: bool) -> Iterator[None]:
    """The per-name kernel on (where built) or off (numpy's one pass and its loop) within the block."""
    kernel = interval_kernels._name_times
    interval_kernels._name_times = kernel if on else None
    try:
        yield
    finally:
        interval_kernels._name_times = kernel


def _same(a: list[NameTime], b: list[NameTime]) -> None:
    assert [(t.name_id, t.count) for t in a] == [(t.name_id, t.count) for t in b]
    for x, y in zip(a, b, strict=True):
        for field in ("total", "merged", "exposed"):
            assert getattr(x, field) == pytest.approx(getattr(y, field), rel=1e-12, abs=1e-6), (x, y, field)


def _events(draw: st.DrawFn, base: float, grain: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 60))
    names = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    starts = draw(st.lists(st.integers(0, 400), min_size=n, max_size=n))
    lengths = draw(st.lists(st.integers(-2, 80), min_size=n, max_size=n))  # negative: end before start (clamped)
    ts = base + np.array(starts, dtype=np.float64) * grain
    return np.array(names, dtype=np.int32), ts, ts + np.array(lengths, dtype=np.float64) * grain


@st.composite
def _case(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, intervals.Set]:
    # absolute microsecond clocks (Kineto), small relative ones, and fractional nanosecond-derived times
    base, grain = draw(st.sampled_from([(1.669783687471392e15, 1.0), (0.0, 1.0), (12.0, 0.001), (3.0e6, 0.37)]))
    names, ts, end = _events(draw, base, grain)
    cs = sorted(draw(st.lists(st.integers(0, 500), max_size=12, unique=True)))
    c_start = base + np.array(cs[0::2], dtype=np.float64) * grain
    c_end = base + np.array(cs[1::2], dtype=np.float64) * grain
    k = min(c_start.size, c_end.size)
    return names, ts, end, (c_start[:k], c_end[:k])


@given(_case(), st.booleans())
def test_all_names_at_once_equal_a_loop_over_names(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, intervals.Set], native: bool
) -> None:
    names, ts, end, compute = case
    with _native(native):
        got = per_name(names, ts, end, compute)
    _same(got, _by_loop(names, ts, end, compute))


@pytest.mark.skipif(not interval_kernels.AVAILABLE, reason="built without a C compiler")
def test_the_kernel_gives_numpys_numbers_on_many_names() -> None:
    """Both ways on many names at once: the same counts and, summed in the same order, the same sums."""
    rng = np.random.default_rng(11)
    names = rng.integers(0, 300, 20_000).astype(np.int32)
    ts = 1.669783687471392e15 + rng.integers(0, 10**8, 20_000).astype(np.float64)
    end = ts + rng.integers(0, 10**4, 20_000)
    compute = intervals.merge(np.sort(ts[:2000]), np.sort(ts[:2000]) + 3e3)
    with _native(True):
        native = per_name(names, ts, end, compute)
    with _native(False):
        expected = per_name(names, ts, end, compute)
    assert [(t.name_id, t.count) for t in native] == [(t.name_id, t.count) for t in expected]
    for x, y in zip(native, expected, strict=True):
        assert (x.total, x.merged) == (y.total, y.merged)
        assert x.exposed == pytest.approx(y.exposed, rel=1e-12, abs=1e-6)


def test_touching_intervals_merge_and_names_stay_apart() -> None:
    names = np.array([0, 0, 1, 1, 0], dtype=np.int32)
    ts = np.array([0.0, 10.0, 5.0, 30.0, 40.0])
    end = np.array([10.0, 20.0, 35.0, 32.0, 41.0])
    got = per_name(names, ts, end, (np.array([15.0]), np.array([31.0])))
    assert got == [NameTime(0, 3, 21.0, 21.0, 16.0), NameTime(1, 2, 32.0, 30.0, 14.0)]


def test_times_whose_shift_is_not_exact_take_the_loop_with_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fractional times far apart: shifting them past each other would round, so the loop answers."""
    looped: list[int] = []

    def counted(*args: Any) -> list[NameTime]:
        looped.append(1)
        return loop(*args)

    monkeypatch.setattr(bottlenecks, "_per_name_loop", counted)
    monkeypatch.setattr(interval_kernels, "_name_times", None)  # numpy's path: the kernel needs no shift
    rng = np.random.default_rng(7)
    names = rng.integers(0, 400, 3000).astype(np.int32)
    ts = rng.uniform(0, 1e9, 3000) + rng.uniform(0, 1, 3000) * 1e-7
    end = ts + rng.uniform(0, 1e6, 3000)
    compute = intervals.merge(rng.uniform(0, 1e9, 50), rng.uniform(0, 1e9, 50) + 5e6)
    _same(per_name(names, ts, end, compute), _by_loop(names, ts, end, compute))
    assert looped == [1]


def test_microsecond_clocks_take_the_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bottlenecks, "_per_name_loop", lambda *a: pytest.fail("took the loop"))
    monkeypatch.setattr(interval_kernels, "_name_times", None)
    rng = np.random.default_rng(8)
    names = rng.integers(0, 400, 3000).astype(np.int32)
    ts = 1.669783687471392e15 + rng.integers(0, 10**9, 3000).astype(np.float64)
    end = ts + rng.integers(0, 10**6, 3000)
    compute = intervals.merge(ts[:50], ts[:50] + 5e6)
    _same(per_name(names, ts, end, compute), _by_loop(names, ts, end, compute))


@pytest.mark.parametrize("block", [1, 7, 64])
def test_names_in_small_blocks_give_the_same_times(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """Blocks end at names: one name longer than a block is a block of its own."""
    monkeypatch.setattr(bottlenecks, "BLOCK_ROWS", block)
    rng = np.random.default_rng(block)
    names = np.concatenate((rng.integers(0, 40, 500), np.full(200, 41))).astype(np.int32)
    ts = 1.669783687471392e15 + rng.integers(0, 10**7, names.size).astype(np.float64)
    end = ts + rng.integers(-3, 10**5, names.size)
    compute = intervals.merge(ts[:30], ts[:30] + 2e5)
    _same(per_name(names, ts, end, compute), _by_loop(names, ts, end, compute))


START = st.one_of(st.integers(0, 9).map(float), st.just(float("nan")))


@given(st.lists(st.tuples(st.integers(0, 40_000), START), max_size=200), st.booleans())
def test_the_row_order_is_lexsorts(rows: list[tuple[int, float]], small_ids: bool) -> None:
    """By name, then start, ties in row order, NaN starts last: ids of 16 bits or more, repeated starts."""
    name_id = np.asarray([r[0] % 50 if small_ids else r[0] for r in rows], dtype=np.int32)
    ts = np.asarray([r[1] for r in rows], dtype=np.float64)
    assert bottlenecks.by_name_then_start(name_id, ts).tolist() == np.lexsort((ts, name_id)).tolist()
