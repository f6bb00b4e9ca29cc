"""A step's stretches with `other` in their gaps (analyses/step_spans._with_other), vectorised: the same list as a
walk through the stretches one by one, on random overlapping stretches of every phase. The pass that folds short
stretches into their neighbours: the native kernel keeps the Python loop's stretches."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.analyses import interval_kernels
from stepscope_analyzer.analyses.step_spans import MAX_SPANS, OTHER, _as_lists, _coarsen, _pass, _with_other


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
        assert _with_other(0.0, hi, s, e, k) == _walk(0.0, hi, s, e, k)


def _random_runs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Touching stretches of random lengths (many short, some zero, a few NaN-free ties) and phases."""
    lengths = np.where(rng.random(n) < 0.7, rng.random(n), rng.integers(1, 300, n).astype(np.float64))
    lengths[rng.random(n) < 0.05] = 0.0
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return starts, ends, rng.integers(0, OTHER + 2, n).astype(np.int64)


@pytest.mark.unit
@pytest.mark.skipif(not interval_kernels.AVAILABLE, reason="the native kernels are not built")
def test_the_native_pass_keeps_the_python_pass_s_stretches() -> None:
    rng = np.random.default_rng(11)
    for _ in range(1500):
        runs = _random_runs(rng, int(rng.integers(0, 120)))
        least = float(rng.choice([0.0, 0.5, 1.0, 5.0, 50.0, 1e9]))
        native = interval_kernels.coarsen_pass(*runs, least)
        assert native is not None
        assert _as_lists(*native) == _pass(_as_lists(*runs), least)


@pytest.mark.unit
@pytest.mark.skipif(not interval_kernels.AVAILABLE, reason="the native kernels are not built")
def test_the_coarsened_step_is_the_same_with_or_without_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    cases = [_random_runs(rng, n) for n in (0, 1, 2, 40, 500, 5000)]
    steps = [float(runs[1][-1]) / 50 if runs[1].size else 1.0 for runs in cases]  # several passes to fit
    native = [_coarsen(runs, step) for runs, step in zip(cases, steps, strict=True)]
    assert max(len(p) for p in native) <= MAX_SPANS and len(native[-1]) > 1
    monkeypatch.setattr(interval_kernels, "_coarsen", None)
    python = [_coarsen(runs, step) for runs, step in zip(cases, steps, strict=True)]
    assert native == python


@pytest.mark.unit
def test_the_kernel_refuses_outputs_too_short() -> None:
    if not interval_kernels.AVAILABLE:
        pytest.skip("the native kernels are not built")
    from stepscope_analyzer.analyses._interval_kernels import coarsen_pass

    s, e, k = _random_runs(np.random.default_rng(1), 10)
    with pytest.raises(ValueError, match="coarsen_pass"):
        coarsen_pass(s, e, k, 1.0, np.empty(9), np.empty(9), np.empty(9, dtype=np.int64))
