"""Robust statistics: median, MAD and a robust z-score with a floor on the scale. Pure."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
