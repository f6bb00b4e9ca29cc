"""The Hodges-Lehmann shift between two samples and its distribution-free (Moses) confidence interval. Pure.

Given baseline values b_1..b_m and candidate values c_1..c_n, every pairwise difference d_ij = c_j - b_i is
formed; the estimate is their median and the (1 - alpha) interval runs from the C-th smallest to the C-th largest,
where C is the largest integer with P(U <= C - 1) <= alpha / 2 for the Mann-Whitney count U under "no shift"
(Hollander & Wolfe, Nonparametric Statistical Methods, 4.3). The count's exact null distribution is used for
small samples, its normal approximation beyond EXACT_MAX_PAIRS pairs. The interval needs no assumption about the
shape of the distributions (step times are skewed: a busy neighbour only ever adds time), only that the steps of
each side are exchangeable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist

import numpy as np

EXACT_MAX_PAIRS = 10_000
"""m * n up to this: exact null distribution of U; beyond, the normal approximation (error well below one rank)."""


@dataclass(frozen=True)
class Shift:
    estimate: float
    low: float | None
    """None: the samples are too small for an interval at this level (the bound would be -inf)"""
    high: float | None
    pairs: int


@cache
def _u_null_counts(m: int, n: int) -> tuple[int, ...]:
    """Number of arrangements with U = u, u = 0..m*n, for samples of m and n: the coefficients of the Gaussian
    binomial prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), in exact integers."""
    size = m * n + 1
    a = [0] * size
    a[0] = 1
    for i in range(1, m + 1):
        step = n + i
        for k in range(size - 1, step - 1, -1):  # times (1 - q^(n+i))
            a[k] -= a[k - step]
        for k in range(i, size):  # divided by (1 - q^i)
            a[k] += a[k - i]
    return tuple(a)


def exact_count(m: int, n: int, alpha: float) -> int:
    """C from the exact null distribution of U."""
    counts = _u_null_counts(min(m, n), max(m, n))
    total = math.comb(m + n, m)
    tail = 0
    c = 0
    for u, count in enumerate(counts):
        tail += count
        if tail > alpha / 2 * total:
            break
        c = u + 1
    return c


def normal_count(m: int, n: int, alpha: float) -> int:
    """C from the normal approximation of U (Hollander & Wolfe 4.3)."""
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return max(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)), 0)


def critical_count(m: int, n: int, alpha: float) -> int:
    """C: the largest integer with P(U <= C - 1) <= alpha / 2 (0: no interval at this level)."""
    if m <= 0 or n <= 0:
        return 0
    return exact_count(m, n, alpha) if m * n <= EXACT_MAX_PAIRS else normal_count(m, n, alpha)


def hodges_lehmann(baseline: Sequence[float], candidate: Sequence[float], confidence: float) -> Shift:
    """Shift of candidate against baseline (candidate - baseline) and its two-sided interval at `confidence`."""
    if not baseline or not candidate:
        raise ValueError("both samples need at least one value")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    diffs = np.sort((c[None, :] - b[:, None]).ravel())
    pairs = int(diffs.size)
    estimate = float(np.median(diffs))
    k = critical_count(b.size, c.size, 1.0 - confidence)
    if k <= 0:
        return Shift(estimate, None, None, pairs)
    return Shift(estimate, float(diffs[k - 1]), float(diffs[pairs - k]), pairs)
