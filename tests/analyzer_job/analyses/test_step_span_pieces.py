"""A step's stretches with `other` in their gaps (analyses/step_spans._with_other), vectorised: the same list as a
walk through the stretches one by one, on random overlapping stretches of every phase; and the coarsening pass in C
(interval_kernels.fold_short) gives the Python pass's stretches."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.analyses import interval_kernels
from stepscope_analyzer.analyses.step_spans import OTHER, _pass, _with_other


def _walk(lo: float, hi: float, s: np.ndarray, e: np.ndarray, k: np.ndarray) -> list[list[float]]:
    out: list[list[float]] = []
    at = lo
    for start, end, kind in zip(s.tolist(), e.tolist(), k.tolist(), strict=True):
        if start > at:
            out.append([at, start, OTHER])
        if end > max(start, at):
            out.append([max(start, at), end, kind])
        at = max(at, end)
    if hi > at:
        out.append([at, hi, OTHER])
    joined: list[list[float]] = []
    for piece in out:
        if joined and joined[-1][2] == piece[2]:
            joined[-1][1] = piece[1]
        else:
            joined.append(piece)
    return joined


@pytest.mark.unit
def test_the_vectorised_stretches_are_the_walk_s() -> None:
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(0, 30))
        hi = float(rng.integers(1, 200))
        s = np.sort(rng.integers(0, int(hi), n).astype(np.float64))
        e = np.minimum(s + rng.integers(0, 40, n), hi)
        k = rng.choice([p for p in range(OTHER + 2) if p != OTHER], n).astype(np.int64)
        got = _with_other(0.0, hi, s, e, k)
        assert [list(p) for p in zip(*(x.tolist() for x in got), strict=True)] == _walk(0.0, hi, s, e, k)


@pytest.mark.unit
@pytest.mark.skipif(not interval_kernels.AVAILABLE, reason="the native kernels are not built")
def test_the_native_fold_is_the_python_pass() -> None:
    rng = np.random.default_rng(11)
    for _ in range(3000):
        n = int(rng.integers(0, 60))
        cuts = np.sort(rng.uniform(0, 1000, n + 1))
        s, e = cuts[:-1].copy(), cuts[1:].copy()
        k = rng.integers(0, OTHER + 1, n).astype(np.int64)
        least = float(rng.choice([0.5, 5.0, 20.0, 80.0]))
        native = interval_kernels.fold_short(s, e, k, least)
        assert native is not None
        expected = _pass([[a, b, c] for a, b, c in zip(s.tolist(), e.tolist(), k.tolist(), strict=True)], least)
        assert [list(p) for p in zip(*(x.tolist() for x in native), strict=True)] == expected
