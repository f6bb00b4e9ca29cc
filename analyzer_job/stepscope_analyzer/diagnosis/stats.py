"""Robust statistics: median, MAD and a robust z-score with a floor on the scale. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

MAD_TO_SIGMA = 1.4826
"""MAD times this estimates the standard deviation of normally distributed values."""


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64))) if len(values) else 0.0


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median."""
    if not values:
        return 0.0
    arr = np.asarray(values, dtype=np.float64)
    return float(np.median(np.abs(arr - np.median(arr))))


def robust_scale(values: Sequence[float], floor: float) -> float:
    """MAD scaled to a standard deviation, never below `floor` (identical ranks have MAD 0)."""
    return max(MAD_TO_SIGMA * mad(values), floor, 1e-9)


def robust_z(value: float, center: float, scale: float) -> float:
    return (value - center) / scale


def medians_of_others(values: Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """For each value, the median of all the other values (O(n log n); 0 where there is no other value)."""
    arr = np.asarray(values, dtype=np.float64)
    n = arr.size
    if n < 2:
        return np.zeros(n)
    order = np.argsort(arr, kind="stable")
    ranked = arr[order]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    m = n - 1  # values left once one is taken out

    def kth(k: int) -> npt.NDArray[np.float64]:
        """The k-th smallest of the others, for every value at once."""
        return np.where(k < pos, ranked[k], ranked[np.minimum(k + 1, n - 1)])

    if m % 2:
        out: npt.NDArray[np.float64] = kth(m // 2)
        return out
    return (kth(m // 2 - 1) + kth(m // 2)) / 2.0


def weighted_quantile(rows: Sequence[tuple[float, float]], q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total ((value, weight) rows sorted by value)."""
    target = q * sum(w for _, w in rows)
    seen = 0.0
    for value, w in rows:
        seen += w
        if seen >= target:
            return value
    return rows[-1][0]


def mean_interval(values: Sequence[float], errors: float = 2.0) -> tuple[float, float, float]:
    """(mean, low, high): the mean of `values` and `errors` standard errors either side (none with one value)."""
    arr = np.asarray(values, dtype=np.float64)
    mean = float(np.mean(arr)) if arr.size else 0.0
    half = errors * float(np.std(arr, ddof=1)) / math.sqrt(arr.size) if arr.size > 1 else 0.0
    return mean, mean - half, mean + half
