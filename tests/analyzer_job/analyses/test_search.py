"""The native sorted search gives numpy.searchsorted(side="right")'s answers: keys in increasing runs, random,
repeated, NaN, infinities and signed zeros; arrays of any layout; and numpy's own answer where it does not apply."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_analyzer.analyses import search

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
        assert search.search_right(a, k).tolist() == _numpy(a, k).tolist()


def test_many_keys_in_runs_against_a_large_array() -> None:
    rng = np.random.default_rng(5)
    a = np.sort(np.round(rng.random(20_000) * 1e5))  # rounded: many equal values
    runs = [np.sort(np.round(rng.random(int(rng.integers(1, 4000))) * 1e5)) for _ in range(30)]
    for k in (np.concatenate(runs), rng.permutation(np.concatenate(runs)), np.concatenate((a, a)), a[::-1]):
        assert np.array_equal(search.search_right(a, k), _numpy(a, k))


def test_nan_sorts_after_every_number_as_in_numpy() -> None:
    a = np.array([-np.inf, -1.0, 0.0, 0.0, 2.0, np.inf, np.nan, np.nan])
    keys = np.array([np.nan, -np.inf, 0.0, -0.0, 1.0, np.inf, np.nan, 3.0] * 8)
    assert search.search_right(a, keys).tolist() == _numpy(a, keys).tolist()
    assert search.search_right(a, keys)[:8].tolist() == [8, 1, 4, 4, 4, 6, 8, 5]


def test_layouts_shapes_and_types() -> None:
    rng = np.random.default_rng(1)
    a = np.sort(rng.random(400))
    keys = rng.random((50, 4))
    assert np.array_equal(search.search_right(a, keys), _numpy(a, keys))  # 2-D keys keep their shape
    assert np.array_equal(search.search_right(a, keys[:, 1]), _numpy(a, keys[:, 1]))  # a strided view
    assert np.array_equal(search.search_right(a[::2], keys[:, 0]), _numpy(a[::2], keys[:, 0]))
    ints = np.arange(100, dtype=np.int64)
    assert np.array_equal(search.search_right(ints, keys.ravel() * 100), _numpy(ints, keys.ravel() * 100))
    assert search.search_right(np.empty(0), keys.ravel()).tolist() == [0] * keys.size
    assert search.search_right(a, np.empty(0)).size == 0
    assert search.search_right(a, keys.ravel()).dtype == np.int64


@pytest.mark.skipif(not search.AVAILABLE, reason="built without a C compiler")
def test_the_kernel_refuses_buffers_of_the_wrong_size() -> None:
    from stepscope_analyzer.analyses._search import search_right

    a, keys = np.arange(4, dtype=np.float64), np.arange(3, dtype=np.float64)
    with pytest.raises(ValueError, match="as long as keys"):
        search_right(a, keys, np.empty(2, dtype=np.int64))
    out = np.empty(3, dtype=np.int64)
    search_right(a, keys, out)
    assert out.tolist() == [1, 2, 3]
