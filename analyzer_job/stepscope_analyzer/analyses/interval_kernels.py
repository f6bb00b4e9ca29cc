"""The interval analyses' native kernels (`_interval_kernels.c`), each with numpy's answer where it is not built or
does not apply: sorted search (numpy.searchsorted(values, keys, side="right"), each key searched from the previous
key's answer, which the analyses' mostly increasing keys make short), the coverage that follows from it, the
pieces of one interval set in or outside another (one sweep over both sets' boundaries), the time each level of
ranked intervals owns first (one sweep with a count per level), and per name of rows sorted by (name, start) the
summed durations, the union of its intervals and the part of it compute covers (one pass), and step_spans' pass that
folds a step's short stretches into their neighbours (a loop each stretch of which depends on the one before), and
what nested events' direct children cover (one pass instead of one per level of nesting). The same answers either
way (tests/analyzer_job/analyses/test_interval_kernels.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Kernel = Callable[[Any, Any, Any], None]
CoverageKernel = Callable[[Any, Any, Any, Any, Any], None]
PiecesKernel = Callable[[Any, Any, Any, Any, bool, Any, Any], int]
LevelsKernel = Callable[[Any, Any, Any, int, Any, Any, Any], int]
NamesKernel = Callable[[Any, Any, Any, Any, Any, Any, Any, Any, Any], None]
CoarsenKernel = Callable[[Any, Any, Any, float, Any, Any, Any], int]
ChildrenKernel = Callable[[Any, Any, Any, Any, Any, Any], None]
Kernels = tuple[Kernel, CoverageKernel, PiecesKernel, LevelsKernel, NamesKernel, CoarsenKernel, ChildrenKernel]


def _native() -> Kernels | tuple[None, None, None, None, None, None, None]:
    try:
        from stepscope_analyzer.analyses._interval_kernels import (
            children,
            coarsen_pass,
            coverage_before,
            first_level,
            name_times,
            pieces,
            search_right,
        )
    except ImportError:  # pragma: no cover - built wherever a C compiler was at install time
        return None, None, None, None, None, None, None
    return search_right, coverage_before, pieces, first_level, name_times, coarsen_pass, children


_kernel, _coverage, _pieces, _first_level, _name_times, _coarsen, _children = _native()
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


def pieces(a: tuple[F64, F64], b: tuple[F64, F64], keep_in_b: bool) -> tuple[F64, F64] | None:
    """intervals._pieces by the native kernel (disjoint sorted sets A and B: A's pieces in B, or outside it, touching
    ones joined); None where it does not apply (not built, not float64, a NaN), for numpy to compute."""
    arrays = (*a, *b)
    if _pieces is None or any(x.dtype != np.float64 or x.ndim != 1 for x in arrays):
        return None
    room = a[0].size + b[0].size + 1
    starts, ends = np.empty(room), np.empty(room)
    a0, a1, b0, b1 = (np.ascontiguousarray(x) for x in arrays)
    count = _pieces(a0, a1, b0, b1, keep_in_b, starts, ends)
    if count < 0:
        return None
    return starts[:count], ends[:count]


def first_level_runs(points: F64, delta: I64, at: I64, levels: int) -> tuple[F64, F64, I64] | None:
    """intervals.by_first_level's sweep by the native kernel: boundaries in time order (delta +1 at a start, -1 at an
    end; at: the level) -> each run of time a level owns first (starts, ends, level), in time order; None where it
    does not apply (not built, other dtypes, a NaN or a level out of range), for numpy to compute."""
    if _first_level is None or points.dtype != np.float64 or delta.dtype != np.int64 or at.dtype != np.int64:
        return None
    room = max(points.size, 1)
    starts, ends, owner = np.empty(room), np.empty(room), np.empty(room, dtype=np.int64)
    args = (np.ascontiguousarray(points), np.ascontiguousarray(delta), np.ascontiguousarray(at))
    count = _first_level(*args, levels, starts, ends, owner)
    if count < 0:
        return None
    return starts[:count], ends[:count], owner[:count]


def name_times(s: F64, e: F64, first: npt.NDArray[np.intp], cover: tuple[F64, F64, F64]) -> tuple[F64, F64, F64] | None:
    """bottlenecks' per-name sums by the native kernel, for rows sorted by (name, start) whose names start at
    `first` (e >= s): per name the summed durations, the union of its intervals, and the part of that union the
    `cover` pieces (starts, ends, cum) cover; None where it does not apply (not built, other dtypes)."""
    if _name_times is None or s.dtype != np.float64 or e.dtype != np.float64 or first.size == 0:
        return None
    if any(x.dtype != np.float64 for x in cover):
        return None
    groups = first.size
    total, merged, covered = np.empty(groups), np.empty(groups), np.empty(groups)
    starts, ends, cum = (np.ascontiguousarray(x) for x in cover)
    rows = (np.ascontiguousarray(s), np.ascontiguousarray(e), np.ascontiguousarray(first, dtype=np.int64))
    _name_times(*rows, starts, ends, cum, total, merged, covered)
    return total, merged, covered


def coarsen_pass(starts: F64, ends: F64, kinds: I64, least: float) -> tuple[F64, F64, I64] | None:
    """step_spans._pass by the native kernel, on a step's stretches in time order (float64 starts and ends, int64
    kinds): each stretch shorter than `least` goes to its longer neighbour, neighbours of one phase join; None where
    it does not apply (not built, other dtypes), for the Python loop to compute."""
    if _coarsen is None or starts.dtype != np.float64 or ends.dtype != np.float64 or kinds.dtype != np.int64:
        return None
    room = starts.size
    out = np.empty(room), np.empty(room), np.empty(room, dtype=np.int64)
    args = (np.ascontiguousarray(starts), np.ascontiguousarray(ends), np.ascontiguousarray(kinds))
    count = _coarsen(*args, least, *out)
    return out[0][:count], out[1][:count], out[2][:count]


def children_cover(starts: F64, ends: F64, own: F64) -> bool:
    """self_times._children by the native kernel: `own` (float64, in place) less what each event's direct children
    cover, for events sorted by start (longer first); False where it does not apply (not built, other dtypes, a
    number that is not finite), for numpy to compute."""
    arrays = (starts, ends, own)
    if _children is None or any(x.dtype != np.float64 or x.ndim != 1 or not x.flags.c_contiguous for x in arrays):
        return False
    if not (np.isfinite(starts).all() and np.isfinite(ends).all()):
        return False
    n = starts.size
    _children(starts, ends, np.sort(ends), np.empty(n, dtype=np.int64), np.empty(n), own)
    return True
