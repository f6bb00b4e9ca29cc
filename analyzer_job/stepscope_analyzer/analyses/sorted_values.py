"""Sorted distinct values and the median of a numeric array, as numpy.unique and numpy.median give them, without
importing numpy.ma.

numpy.median and a plain numpy.unique ask numpy.ma whether their input is masked, which imports it (11-13 ms) on
first use. A rank's analysis needs neither masked arrays nor that import: these two answer the same for plain arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def distinct(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The sorted distinct values of a flat array of integers or of floats without NaN (numpy.unique's answer)."""
    ordered = np.sort(np.asarray(values).ravel())
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def median(values: npt.ArrayLike) -> float:
    """numpy.median of a flat array: NaN when it is empty or holds a NaN."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    n = flat.size
    if n == 0 or np.isnan(flat).any():
        return float("nan")
    lo, hi = (n - 1) // 2, n // 2
    part = np.partition(flat, (lo, hi))
    return float((part[lo] + part[hi]) / 2.0)
