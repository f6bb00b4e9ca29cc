"""Host time outside every op, named by where in the step it happens. Pure.

A stall without any annotation (plain-Python preprocessing, a blocking log write, a garbage collection) leaves a
gap on the training thread: no op, no collective in flight, no phase region. Each gap is named after the
training-thread region that holds it (a `record_function` region of the user's), else after the events around it
("between `aten::randn` and `DistributedDataParallel.forward`"). The same place in the step gets the same name on
every rank, so the diagnosis compares it across ranks like any function.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.analyses.intervals import Set
from stepscope_analyzer.analyses.phase_names import BACKWARD, COMM, DATA, FORWARD, OPTIMIZER, STEP, name_mask
from stepscope_analyzer.analyses.sorted_values import distinct, median
from stepscope_analyzer.analyses.step_phases import PhaseSets, StepWindows
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import Bottleneck

F64 = npt.NDArray[np.float64]
CATEGORY = "host_gap"
MAX_NAME = 120
_EDGE_US = 0.5


def _cut(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def pure_gaps(sets: PhaseSets, steps: StepWindows) -> Set:
    """Step time on the training thread outside every phase region and op."""
    covered = intervals.union(*sets.sets.values())
    return intervals.subtract(intervals.merge(steps.start, steps.end), covered)


def _enclosing(ev: TraceColumns, main: npt.NDArray[np.bool_], mid: F64) -> list[str | None]:
    """For each gap midpoint, the innermost user region (not a phase marker) of the training thread holding it."""
    markers = name_mask(ev, DATA) | name_mask(ev, OPTIMIZER) | name_mask(ev, BACKWARD) | name_mask(ev, FORWARD)
    rows = np.flatnonzero(main & ev.cat_mask("user_annotation") & ~markers & ~name_mask(ev, COMM))
    out: list[str | None] = [None] * mid.size
    best = np.full(mid.size, np.inf)
    for nid in distinct(ev.name_id[rows]).tolist():
        sel = rows[ev.name_id[rows] == nid]
        u = intervals.merge(ev.ts[sel], ev.ts[sel] + ev.dur[sel])
        hit = intervals.inside(u, mid)
        span = median(ev.dur[sel])
        for i in np.flatnonzero(hit & (span < best)).tolist():
            out[i] = ev.names[nid]
            best[i] = span
    return out


def _neighbours(ev: TraceColumns, main: npt.NDArray[np.bool_], g0: F64, g1: F64) -> tuple[list[str], list[str]]:
    """The training-thread event that ended last before each gap and the one that starts first after it."""
    rows = np.flatnonzero(main & ~ev.cat_mask("python_function"))
    ends = ev.ts[rows] + ev.dur[rows]
    order = intervals.ending_order(ends, ev.dur[rows])
    by_end, end_sorted = rows[order], ends[order]
    by_start = rows[intervals.nesting_order(ev.ts[rows], ev.dur[rows])]
    start_sorted = ev.ts[by_start]
    before = np.searchsorted(end_sorted, g0 + _EDGE_US, side="right") - 1
    after = np.searchsorted(start_sorted, g1 - _EDGE_US, side="left")
    prev = [ev.names[ev.name_id[by_end[i]]] if i >= 0 else "the step's start" for i in before.tolist()]
    nxt = [ev.names[ev.name_id[by_start[i]]] if i < by_start.size else "the step's end" for i in after.tolist()]
    return prev, nxt


def host_gap_functions(
    ev: TraceColumns, steps: StepWindows, sets: PhaseSets, window: float, top_n: int
) -> list[Bottleneck]:
    """The largest places of unannotated host time, as `host_gap` entries (µs over the whole window)."""
    g0, g1 = pure_gaps(sets, steps)
    if g0.size == 0 or window <= 0:
        return []
    main = ev.cat_mask("cpu_op", "user_annotation", "python_function") & (ev.stream == -1)
    main &= (ev.pid == steps.pid) & (ev.tid == steps.tid) & ~name_mask(ev, STEP)
    inside = _enclosing(ev, main, (g0 + g1) / 2)
    prev, nxt = _neighbours(ev, main, g0, g1)
    totals: dict[str, tuple[int, float]] = {}
    for i, length in enumerate((g1 - g0).tolist()):
        key = f"inside {inside[i]}" if inside[i] else f"between {_cut(prev[i])} and {_cut(nxt[i])}"
        count, total = totals.get(key, (0, 0.0))
        totals[key] = (count + 1, total + length)
    rows = [
        Bottleneck(
            name=f"host time {key}",
            category=CATEGORY,
            count=count,
            total_us=total,
            mean_us=total / count,
            bottleneck_ratio=min(1.0, total / window),
        )
        for key, (count, total) in totals.items()
    ]
    rows.sort(key=lambda b: -b.total_us)
    return rows[:top_n]
