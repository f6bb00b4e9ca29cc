"""Sorted search for the interval analyses: numpy.searchsorted(values, keys, side="right"), by the native kernel
(`_search.c`: each key searched from the previous key's answer, which the analyses' mostly increasing keys make
short) where it is built and both arrays are float64, else by numpy. The same answers either way
(tests/analyzer_job/analyses/test_search.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Kernel = Callable[[Any, Any, Any], None]
CoverageKernel = Callable[[Any, Any, Any, Any, Any], None]


def _native() -> tuple[Kernel, CoverageKernel] | tuple[None, None]:
    try:
        from stepscope_analyzer.analyses._search import coverage_before, search_right
    except ImportError:  # pragma: no cover - built wherever a C compiler was at install time
        return None, None
    return search_right, coverage_before


_kernel, _coverage = _native()
AVAILABLE = _kernel is not None
SMALL = 32
"""fewer keys than this: numpy (the call's own cost is all there is)"""


def search_right(values: F64, keys: npt.NDArray[Any]) -> I64:
    """For each key, the number of `values` (sorted ascending) that are <= it."""
    if (
        _kernel is None
        or keys.size < SMALL
        or values.dtype != np.float64
        or keys.dtype != np.float64
        or values.ndim != 1
    ):
        found: I64 = np.searchsorted(values, keys, side="right").astype(np.int64, copy=False)
        return found
    flat = np.ascontiguousarray(keys).reshape(-1)
    out = np.empty(flat.size, dtype=np.int64)
    _kernel(np.ascontiguousarray(values), flat, out)
    return out.reshape(keys.shape)


def coverage_before(starts: F64, ends: F64, cum: F64, x: npt.NDArray[Any]) -> F64 | None:
    """intervals.coverage_before by the native kernel (one pass: the search and the sums); None where it does not
    apply (not built, few keys, not float64), for numpy to compute."""
    if _coverage is None or x.size < SMALL or x.dtype != np.float64 or starts.dtype != np.float64:
        return None
    if ends.dtype != np.float64 or cum.dtype != np.float64 or starts.ndim != 1:
        return None
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.size, dtype=np.float64)
    _coverage(np.ascontiguousarray(starts), np.ascontiguousarray(ends), np.ascontiguousarray(cum), flat, out)
    return out.reshape(x.shape)
