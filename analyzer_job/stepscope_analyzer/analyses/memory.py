"""Memory over the recorded steps, from the allocator's `[memory]` events (torch.profiler's profile_memory): the
peaks of allocated and reserved memory, and the totals over time binned to at most MAX_POINTS points (the most in
each bin, so no peak is lost). CUDA memory where the trace has CUDA events, else CPU memory. Pure."""

from __future__ import annotations

import numpy as np

from stepscope_analyzer.analyses.step_phases import StepWindows
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import MemoryUsage

MAX_POINTS = 240
CUDA = 1


def memory_usage(ev: TraceColumns, windows: StepWindows | None) -> MemoryUsage | None:
    """The rank's memory over its recorded steps (over the whole trace without step windows); None without
    allocator events."""
    rows = ev.memory  # (ts, allocated, reserved, device) each
    if rows.shape[0] == 0:
        return None
    cuda = rows[:, 3] == CUDA
    rows = rows[cuda] if cuda.any() else rows[~cuda]
    lo, hi = (float(windows.start[0]), float(windows.end[-1])) if windows else (float(rows[0, 0]), float(rows[-1, 0]))
    rows = rows[(rows[:, 0] >= lo) & (rows[:, 0] <= hi)]
    if rows.shape[0] == 0:
        return None
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    t = (rows[:, 0] - lo) / 1000.0
    bins = np.minimum((t / max((hi - lo) / 1000.0, 1e-9) * MAX_POINTS).astype(np.int64), MAX_POINTS - 1)
    starts = np.flatnonzero(np.concatenate(([True], bins[1:] != bins[:-1])))
    allocated = np.maximum.reduceat(rows[:, 1], starts)
    reserved = np.maximum.reduceat(rows[:, 2], starts)
    return MemoryUsage(
        device="cuda" if cuda.any() else "cpu",
        events=int(rows.shape[0]),
        peak_allocated_bytes=float(rows[:, 1].max()),
        peak_reserved_bytes=float(rows[:, 2].max()),
        t_ms=[round(float(x), 3) for x in t[starts]],
        allocated_bytes=[float(x) for x in allocated],
        reserved_bytes=[float(x) for x in reserved],
        step_starts_ms=[round((float(s) - lo) / 1000.0, 3) for s in windows.start] if windows else [],
    )
