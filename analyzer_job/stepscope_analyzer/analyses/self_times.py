"""Self (exclusive) time of host events: an event's duration less the part its direct children on the same thread
cover. Pure.

Host events of one thread nest (a Python frame holds the ops it calls, an op the ops it dispatches to, a
record_function region everything inside it), so an inclusive time counts the same microsecond at every level of the
stack. The self time counts it once, at the innermost event: summed over a thread's events it is the thread's busy
time, and a change of the code shows at the op or region that changed, not at every frame above it. A child that
overruns its parent (clock rounding) is clipped to it; self times are never negative.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import interval_kernels, intervals
from stepscope_analyzer.analyses.sorted_values import distinct

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def self_durations(pid: I64, tid: I64, ts: F64, dur: F64, rows: npt.NDArray[np.intp]) -> F64:
    """Self time of each of `rows` (indices into the columns), in the order of `rows`.

    Vectorised over all threads at once: each thread's events are moved onto a time range of their own (shifted by
    the thread's position times the span of the rows), so that no two threads overlap and one pass serves them all.
    Sorted by start (a parent before the children that start with it), an event's depth is how many earlier events
    are still open at its start (those that started before it, less those that ended by then); its parent is the
    latest earlier event one level up. Zero-length events have no children and cover nothing: left out (self time
    0)."""
    d = dur[rows]
    keep = np.flatnonzero(d > 0)  # negative and NaN lengths too
    if keep.size == 0:
        return np.zeros(rows.size, dtype=np.float64)
    d = d[keep]
    sub = rows[keep]
    key = pid[sub] * 0x1_0000_0000
    key += tid[sub]
    thread = np.searchsorted(distinct(key), key)  # each event's thread, numbered 0..
    del key
    s = ts[sub]
    del sub
    first = float(s.min())
    span = float(np.max(s + d)) - first + 1.0
    s -= first
    s += thread * span  # threads side by side, never overlapping
    del thread  # a rank's largest arrays: each one freed as soon as it is used, for the worker's peak memory
    order = intervals.nesting_order(s, d)
    starts = s[order]
    del s
    own = d[order]
    del d
    ends = starts + own
    _children(starts, ends, own)
    del starts, ends
    out = np.zeros(rows.size, dtype=np.float64)
    out[keep[order]] = np.maximum(own, 0.0, out=own)
    return out


def _children(starts: F64, ends: F64, own: F64) -> None:
    """Subtract from each event (sorted by start, longer first; threads apart in time) what its direct children
    cover (by the interval kernels in one pass where they are built, else one numpy pass per level: the same
    numbers)."""
    if interval_kernels.children_cover(starts, ends, own):
        return
    n = starts.size
    closed = np.searchsorted(np.sort(ends), starts, side="right")  # events ended by each start
    depth = np.arange(n) - closed
    index = np.arange(n)
    for level in range(1, int(depth.max(initial=0)) + 1):
        kids = index[depth == level]
        ups = index[depth == level - 1]
        if kids.size == 0 or ups.size == 0:
            continue
        at = np.searchsorted(ups, kids) - 1
        ok = at >= 0
        kids, parents = kids[ok], ups[at[ok]]
        cover = np.maximum(np.minimum(ends[kids], ends[parents]) - starts[kids], 0.0)
        own -= np.bincount(parents, weights=cover, minlength=n)


def self_time_by_name(name_id: npt.NDArray[np.int32], self_us: F64, names: int) -> F64:
    """Summed self time per name id (an array `names` long)."""
    return np.bincount(name_id, weights=self_us, minlength=names).astype(np.float64)
