"""The interval analyses' native kernels give numpy's answers: the sorted search (keys in increasing runs, random,
repeated, NaN, infinities and signed zeros; arrays of any layout), coverage, set pieces and first levels, each
against its numpy path, and a real trace's whole summary with every kernel off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_analyzer.analyses import interval_kernels as kernels

pytestmark = pytest.mark.unit

SPECIAL = st.sampled_from([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e300, 5e-324])
VALUE = st.one_of(SPECIAL, st.floats(-10, 10), st.integers(-5, 5).map(float))


def _numpy(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    return np.searchsorted(values, keys, side="right")


@given(st.lists(VALUE, max_size=300), st.lists(VALUE, min_size=0, max_size=300), st.integers(1, 12))
def test_the_same_answers_as_numpy(values: list[float], keys: list[float], runs: int) -> None:
    a = np.sort(np.asarray(values, dtype=np.float64))
    x = np.asarray(keys * 2, dtype=np.float64)  # at least SMALL keys most of the time, so the kernel answers
    # keys as the analyses make them: a few increasing runs, one after the other
    grouped = np.concatenate([np.sort(part) for part in np.array_split(x, runs)]) if x.size else x
    for k in (x, grouped, np.sort(x), np.sort(x)[::-1]):
        assert kernels.search_right(a, k).tolist() == _numpy(a, k).tolist()


def test_many_keys_in_runs_against_a_large_array() -> None:
    rng = np.random.default_rng(5)
    a = np.sort(np.round(rng.random(20_000) * 1e5))  # rounded: many equal values
    runs = [np.sort(np.round(rng.random(int(rng.integers(1, 4000))) * 1e5)) for _ in range(30)]
    for k in (np.concatenate(runs), rng.permutation(np.concatenate(runs)), np.concatenate((a, a)), a[::-1]):
        assert np.array_equal(kernels.search_right(a, k), _numpy(a, k))


def test_nan_sorts_after_every_number_as_in_numpy() -> None:
    a = np.array([-np.inf, -1.0, 0.0, 0.0, 2.0, np.inf, np.nan, np.nan])
    keys = np.array([np.nan, -np.inf, 0.0, -0.0, 1.0, np.inf, np.nan, 3.0] * 8)
    assert kernels.search_right(a, keys).tolist() == _numpy(a, keys).tolist()
    assert kernels.search_right(a, keys)[:8].tolist() == [8, 1, 4, 4, 4, 6, 8, 5]


def test_layouts_shapes_and_types() -> None:
    rng = np.random.default_rng(1)
    a = np.sort(rng.random(400))
    keys = rng.random((50, 4))
    assert np.array_equal(kernels.search_right(a, keys), _numpy(a, keys))  # 2-D keys keep their shape
    assert np.array_equal(kernels.search_right(a, keys[:, 1]), _numpy(a, keys[:, 1]))  # a strided view
    assert np.array_equal(kernels.search_right(a[::2], keys[:, 0]), _numpy(a[::2], keys[:, 0]))
    ints = np.arange(100, dtype=np.int64)
    assert np.array_equal(kernels.search_right(ints, keys.ravel() * 100), _numpy(ints, keys.ravel() * 100))
    assert kernels.search_right(np.empty(0), keys.ravel()).tolist() == [0] * keys.size
    assert kernels.search_right(a, np.empty(0)).size == 0
    assert kernels.search_right(a, keys.ravel()).dtype == np.int64


@pytest.mark.skipif(not kernels.AVAILABLE, reason="built without a C compiler")
def test_the_kernel_refuses_buffers_of_the_wrong_size() -> None:
    from stepscope_analyzer.analyses._interval_kernels import search_right

    a, keys = np.arange(4, dtype=np.float64), np.arange(3, dtype=np.float64)
    with pytest.raises(ValueError, match="as long as keys"):
        search_right(a, keys, np.empty(2, dtype=np.int64))
    out = np.empty(3, dtype=np.int64)
    search_right(a, keys, out)
    assert out.tolist() == [1, 2, 3]


def _pieces(bounds: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted pieces [b0, b1), [b2, b3), ... of sorted bounds (touching and empty pieces included)."""
    b = np.sort(np.asarray(bounds[: len(bounds) // 2 * 2], dtype=np.float64))
    return b[0::2], b[1::2]


@given(
    st.lists(st.integers(-50, 50).map(float), max_size=80),
    st.lists(st.one_of(st.integers(-60, 60).map(float), st.floats(-60, 60), SPECIAL), max_size=120),
    st.integers(1, 6),
)
def test_coverage_the_same_as_numpy(bounds: list[float], keys: list[float], runs: int) -> None:
    """intervals.coverage_before by the kernel and by numpy (the kernel turned off): equal, NaN where numpy has it."""
    from stepscope_analyzer.analyses import intervals

    starts, ends = _pieces(bounds)
    x = np.resize(np.asarray(keys, dtype=np.float64), max(2 * len(keys), kernels.SMALL) if keys else 0)
    grouped = np.concatenate([np.sort(part) for part in np.array_split(x, runs)]) if x.size else x
    for k in (x, grouped):
        native = intervals.coverage_before(starts, ends, k)
        kernel, kernels._coverage = kernels._coverage, None
        try:
            expected = intervals.coverage_before(starts, ends, k)
        finally:
            kernels._coverage = kernel
        assert np.array_equal(native, expected, equal_nan=True)


@pytest.mark.skipif(not kernels.AVAILABLE, reason="built without a C compiler")
def test_the_coverage_kernel_is_taken_and_checks_its_buffers() -> None:
    from stepscope_analyzer.analyses._interval_kernels import coverage_before

    starts, ends = np.array([0.0, 10.0]), np.array([5.0, 20.0])
    cum = np.array([0.0, 5.0, 15.0])
    x = np.array([-1.0, 0.0, 3.0, 7.0, 12.0, 25.0] * 8)
    assert kernels.coverage_before(starts, ends, cum, x) is not None
    out = np.empty(x.size)
    coverage_before(starts, ends, cum, x, out)
    assert out[:6].tolist() == [0.0, 0.0, 3.0, 5.0, 7.0, 15.0]
    # NaN in, NaN out; a piece ending before it starts covers nothing (numpy clips it at 0)
    out = np.empty(x.size)
    coverage_before(starts, np.array([5.0, 8.0]), cum, np.array([np.nan, 9.0, 12.0] * 16), out)
    assert np.isnan(out[0]) and out[1:3].tolist() == [5.0, 5.0]
    with pytest.raises(ValueError, match="as long as x"):
        coverage_before(starts, ends, cum, x, np.empty(3))
    with pytest.raises(ValueError, match="as long as starts"):
        coverage_before(starts, ends[:1], cum, x, out)


@given(
    st.lists(st.integers(-30, 30).map(float), max_size=40),
    st.lists(st.integers(-30, 30).map(float), max_size=40),
    st.booleans(),
)
def test_pieces_the_same_as_numpy(a_bounds: list[float], b_bounds: list[float], keep_in_b: bool) -> None:
    """A ∩ B and A - B by the sweep and by numpy's midpoints (the kernel turned off), touching and empty pieces
    included in the inputs."""
    from stepscope_analyzer.analyses import intervals

    a, b = _pieces(a_bounds), _pieces(b_bounds)
    native = kernels.pieces(a, b, keep_in_b)
    if kernels.AVAILABLE:
        assert native is not None
    kernel, kernels._pieces = kernels._pieces, None
    try:
        expected = intervals._pieces(a, b, keep_in_b=keep_in_b) if a[0].size and b[0].size else None
    finally:
        kernels._pieces = kernel
    if native is not None and expected is not None:
        assert native[0].tolist() == expected[0].tolist() and native[1].tolist() == expected[1].tolist()


@pytest.mark.skipif(not kernels.AVAILABLE, reason="built without a C compiler")
def test_the_pieces_kernel_leaves_nan_to_numpy_and_checks_its_buffers() -> None:
    from stepscope_analyzer.analyses._interval_kernels import pieces

    a = (np.array([0.0, 10.0]), np.array([5.0, np.nan]))
    b = (np.array([3.0]), np.array([12.0]))
    assert kernels.pieces(a, b, True) is None  # a NaN end: no hang, numpy decides
    assert kernels.pieces((a[0], np.array([5.0, 20.0])), b, True) is not None
    got = kernels.pieces((a[0], np.array([5.0, 20.0])), b, False)
    assert got is not None and got[0].tolist() == [0.0, 12.0] and got[1].tolist() == [3.0, 20.0]
    with pytest.raises(ValueError, match="room for"):
        pieces(a[0], a[1], b[0], b[1], True, np.empty(2), np.empty(2))


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 12), st.integers(0, 4)).map(
            lambda t: (float(t[0]), float(t[0] + t[1]), t[2])
        ),
        max_size=40,
    )
)
def test_first_levels_the_same_as_numpy(rows: list[tuple[float, float, int]]) -> None:
    """intervals.by_first_level by the sweep and by numpy's per-level counts (the kernel turned off): the same sets
    for every level, overlapping, nested, touching and empty intervals of 5 levels included."""
    from stepscope_analyzer.analyses import intervals

    ts = np.asarray([r[0] for r in rows], dtype=np.float64)
    end = np.asarray([r[1] for r in rows], dtype=np.float64)
    level = np.asarray([r[2] for r in rows], dtype=np.int64)
    native = intervals.by_first_level(ts, end, level, 5)
    kernel, kernels._first_level = kernels._first_level, None
    try:
        expected = intervals.by_first_level(ts, end, level, 5)
    finally:
        kernels._first_level = kernel
    assert [(s.tolist(), e.tolist()) for s, e in native] == [(s.tolist(), e.tolist()) for s, e in expected]


@pytest.mark.skipif(not kernels.AVAILABLE, reason="built without a C compiler")
def test_the_first_level_kernel_leaves_nan_and_bad_levels_to_numpy() -> None:
    from stepscope_analyzer.analyses._interval_kernels import first_level

    points = np.array([0.0, 2.0, 5.0, 9.0])
    delta = np.array([1, 1, -1, -1], dtype=np.int64)
    at = np.array([1, 0, 0, 1], dtype=np.int64)
    runs = kernels.first_level_runs(points, delta, at, 2)
    assert runs is not None
    assert [r.tolist() for r in runs] == [[0.0, 2.0, 5.0], [2.0, 5.0, 9.0], [1, 0, 1]]
    assert kernels.first_level_runs(np.array([0.0, np.nan]), delta[:2], at[:2], 2) is None
    assert kernels.first_level_runs(points, delta, at, 1) is None  # level 1 of 1: out of range
    with pytest.raises(ValueError, match="outputs as long"):
        first_level(points, delta, at, 2, np.empty(1), np.empty(1), np.empty(1, dtype=np.int64))


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.skipif(not kernels.AVAILABLE, reason="built without a C compiler")
@pytest.mark.parametrize("trace", ["gpu_ddp_source.json.gz", "gloo_2rank_rank0.pt.trace.json.gz"])
def test_a_rank_summary_is_the_same_without_the_kernels(trace: str) -> None:
    """Every kernel off (numpy's answers) gives the very same summary of a real GPU and a real CPU trace."""
    from stepscope_analyzer.analyses import summarize_trace

    with_kernels = summarize_trace(FIXTURES / trace, top_n=1000).model_dump_json()
    names = ("_kernel", "_coverage", "_pieces", "_first_level", "_name_times")
    saved = {name: getattr(kernels, name) for name in names}
    try:
        for name in names:
            setattr(kernels, name, None)
        without = summarize_trace(FIXTURES / trace, top_n=1000).model_dump_json()
    finally:
        for name, kernel in saved.items():
            setattr(kernels, name, kernel)
    assert with_kernels == without
