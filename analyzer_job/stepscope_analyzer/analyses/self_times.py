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

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def self_durations(pid: I64, tid: I64, ts: F64, dur: F64, rows: npt.NDArray[np.intp]) -> F64:
    """Self time of each of `rows` (indices into the columns), in the order of `rows`."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.float64)
    d = np.maximum(dur[rows], 0.0)
    order = np.lexsort((-d, ts[rows], tid[rows], pid[rows]))  # by thread, then start; parents before children
    starts = ts[rows][order].tolist()
    ends = (ts[rows][order] + d[order]).tolist()
    threads = (pid[rows][order] * 0x1_0000_0000 + tid[rows][order]).tolist()
    own = d[order].tolist()
    stack: list[int] = []
    current = None
    for i, (s, e, t) in enumerate(zip(starts, ends, threads, strict=True)):
        if t != current:
            stack.clear()
            current = t
        while stack and ends[stack[-1]] <= s:
            stack.pop()
        if stack:
            parent = stack[-1]
            own[parent] -= min(e, ends[parent]) - s
        stack.append(i)
    out = np.empty(rows.size, dtype=np.float64)
    out[order] = np.maximum(np.asarray(own, dtype=np.float64), 0.0)
    return out


def self_time_by_name(name_id: npt.NDArray[np.int32], self_us: F64, names: int) -> F64:
    """Summed self time per name id (an array `names` long)."""
    return np.bincount(name_id, weights=self_us, minlength=names).astype(np.float64)
