"""Where each recorded step's time goes: data_loading, forward, backward, optimizer, communication_wait, other.

One decomposition serves the report's phase bars and the diagnosis (its per-step samples). Each instant of a step
gets exactly one phase, so the six add up to the step's duration.

CPU traces follow the training thread (the thread of the ProfilerStep spans), by precedence:
1. inside a collective op on that thread -> communication_wait (gloo's point-to-point sends and receives are not
   such ops: their spans last from the isend or irecv to the end of its wait, and hold the thread's own work between,
   phase_names.IN_FLIGHT; they count as in flight, rule 6);
2. inside a data-loading region (the DataLoader's `__next__`, its Python frames) -> data_loading;
3. inside the optimizer's `step`/`zero_grad` -> optimizer;
4. backward ops (autograd's `evaluate_function`, DDP's reducer), the gaps between two consecutive backward ops,
   a `## backward ##` region -> backward;
5. other ops: forward when a backward op follows later in the step (this holds the loss, and each micro-batch of
   gradient accumulation), else other;
6. no op running, but a collective in flight on any thread (DDP's bucket all-reduce, an `all_reduce().wait()`)
   -> communication_wait;
7. a forward region (`DistributedDataParallel.forward`, `## forward ##`) -> forward;
8. the rest -> other: host time outside the step's work (plain Python, GC, logging, user regions).

GPU traces follow the GPU, not the CPU that launched the work: kernels belong to the step whose span holds their
launch, and a step's GPU window runs from when the GPU could start it (its host span has begun and the previous
step's kernels are done, at the latest its first kernel) to the next step's start. In that window a compute
kernel or memory op counts for the phase its launch was in (the launch's thread context, as above), collective
kernels not overlapped by them are communication_wait, idle GPU time while a host-side collective is in flight on
any thread (gloo on CUDA tensors, a barrier, an object collective) is communication_wait too, and the remaining
idle GPU time is data_loading while the training thread is in a data-loading region, else other. The window's
shares are applied to the step's duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.analyses.intervals import Set
from stepscope_analyzer.analyses.kernel_types import KernelType
from stepscope_analyzer.analyses.phase_names import (
    BACKWARD,
    COMM,
    DATA,
    FORWARD,
    IN_FLIGHT,
    OPTIMIZER,
    STEP,
    name_mask,
)
from stepscope_analyzer.analyses.sorted_values import distinct
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import StepPhases

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

PHASES = ("data_loading", "forward", "backward", "optimizer", "communication_wait", "other")
HOST_CATS = ("cpu_op", "python_function", "user_annotation", "cuda_runtime", "cuda_driver")


@dataclass
class StepWindows:
    """The recorded steps of a rank: host ProfilerStep spans on the training thread, in time order."""

    rows: I64
    start: F64
    end: F64
    pid: int
    tid: int

    @property
    def count(self) -> int:
        return int(self.rows.size)

    def index_of(self, ts: F64) -> I64:
        """Step index holding each time (-1 outside every step)."""
        idx = np.searchsorted(self.start, ts, side="right") - 1
        safe = np.maximum(idx, 0)
        ok = (idx >= 0) & (ts < self.end[safe])
        out: I64 = np.where(ok, idx, -1).astype(np.int64)
        return out


def step_windows(ev: TraceColumns) -> StepWindows | None:
    steps = np.flatnonzero(name_mask(ev, STEP) & (ev.stream == -1) & (ev.cat_id != ev.cat_code("gpu_user_annotation")))
    if steps.size == 0:
        return None
    steps = steps[np.argsort(ev.ts[steps], kind="stable")]
    # the training thread is the one holding most step spans; nested or duplicated spans are dropped
    keys, counts = np.unique(np.stack([ev.pid[steps], ev.tid[steps]]), axis=1, return_counts=True)
    pid, tid = (int(v) for v in keys[:, int(np.argmax(counts))])
    steps = steps[(ev.pid[steps] == pid) & (ev.tid[steps] == tid)]
    start = ev.ts[steps]
    end = start + ev.dur[steps]
    keep = np.concatenate(([True], start[1:] >= np.maximum.accumulate(end)[:-1]))
    steps = steps[keep]
    return StepWindows(steps.astype(np.int64), ev.ts[steps], ev.ts[steps] + ev.dur[steps], pid, tid)


@dataclass
class HostRegions:
    """Regions of the training thread (disjoint unions), and collectives in flight on any thread."""

    comm_main: Set
    comm_any: Set
    data: Set
    optimizer: Set
    backward: Set
    forward_ops: Set
    other_ops: Set
    forward_regions: Set


def _u(ev: TraceColumns, mask: Mask) -> Set:
    return intervals.merge(ev.ts[mask], ev.ts[mask] + ev.dur[mask])


def _bridges(ev: TraceColumns, bwd: Set, other_rows: Mask, steps: StepWindows) -> Set:
    """Gaps between consecutive backward intervals of one step with no other training-thread event inside."""
    if bwd[0].size < 2:
        return intervals.empty()
    g_start, g_end = bwd[1][:-1], bwd[0][1:]
    same = steps.index_of(g_start) == steps.index_of(g_end - 1e-6)
    starts = np.sort(ev.ts[other_rows])
    inside = np.searchsorted(starts, g_end, side="left") - np.searchsorted(starts, g_start, side="right")
    keep = same & (inside == 0) & (g_end > g_start)
    return g_start[keep], g_end[keep]


def host_regions(ev: TraceColumns, steps: StepWindows) -> HostRegions:
    host = ev.cat_mask(*HOST_CATS) & (ev.stream == -1)
    main = host & (ev.pid == steps.pid) & (ev.tid == steps.tid)
    main[steps.rows] = False
    main &= ~name_mask(ev, STEP)
    comm = name_mask(ev, COMM) & host
    ops = main & ev.cat_mask("cpu_op") & ~comm
    bwd_rows = main & name_mask(ev, BACKWARD)
    bwd_ops = bwd_rows & ev.cat_mask("cpu_op")
    bwd = _u(ev, bwd_rows)
    comm_any = _u(ev, comm)
    bwd = intervals.union(bwd, intervals.subtract(_bridges(ev, _u(ev, bwd_ops), main & ~bwd_rows, steps), comm_any))
    # a non-backward op is forward work when a backward op of the same step starts after it
    other_ops = ops & ~bwd_rows
    rows = np.flatnonzero(other_ops)
    step_of = steps.index_of(ev.ts[rows])
    last_bwd = np.full(steps.count, -np.inf)
    b_rows = np.flatnonzero(bwd_ops)
    b_step = steps.index_of(ev.ts[b_rows])
    ok = b_step >= 0
    np.maximum.at(last_bwd, b_step[ok], ev.ts[b_rows][ok])
    is_fwd = (step_of >= 0) & (ev.ts[rows] < last_bwd[np.maximum(step_of, 0)])
    fwd_mask = np.zeros(len(ev), dtype=bool)
    fwd_mask[rows[is_fwd]] = True
    return HostRegions(
        comm_main=_u(ev, comm & main & ~name_mask(ev, IN_FLIGHT)),
        comm_any=comm_any,
        data=_u(ev, main & name_mask(ev, DATA)),
        optimizer=_u(ev, main & name_mask(ev, OPTIMIZER)),
        backward=bwd,
        forward_ops=_u(ev, fwd_mask),
        other_ops=_u(ev, other_ops & ~fwd_mask),
        forward_regions=_u(ev, main & name_mask(ev, FORWARD)),
    )


@dataclass
class PhaseSets:
    """The disjoint interval set of each phase (but `other`, which is what is left of the steps)."""

    sets: dict[str, Set]


def cpu_phase_sets(r: HostRegions) -> PhaseSets:
    taken = r.comm_main
    out: dict[str, Set] = {}
    for name, region in (("data_loading", r.data), ("optimizer", r.optimizer), ("backward", r.backward)):
        out[name] = intervals.subtract(region, taken)
        taken = intervals.union(taken, out[name])
    fwd_ops = intervals.subtract(r.forward_ops, taken)
    other_ops = intervals.subtract(intervals.subtract(r.other_ops, taken), fwd_ops)
    busy = intervals.union(taken, fwd_ops, other_ops)
    comm_gap = intervals.subtract(r.comm_any, busy)
    fwd_gap = intervals.subtract(r.forward_regions, intervals.union(busy, comm_gap))
    out["forward"] = intervals.union(fwd_ops, fwd_gap)
    out["communication_wait"] = intervals.union(r.comm_main, comm_gap)
    out["other_ops"] = other_ops
    return PhaseSets(out)


def per_step(sets: PhaseSets, steps: StepWindows, windows: tuple[F64, F64] | None = None) -> list[StepPhases]:
    """Per step, each phase's time inside the step; with `windows` (one [start, end) per step, e.g. the step's
    GPU window), each phase's share of that window applied to the step's duration."""
    dur = steps.end - steps.start
    start, end = (steps.start, steps.end) if windows is None else windows
    span = np.maximum(end - start, 0.0)
    factor = np.where(span > 0, dur / np.maximum(span, 1e-9), 0.0)
    values = {
        name: intervals.lengths_within(sets.sets[name], start, end) * factor
        for name in PHASES
        if name != "other" and name in sets.sets
    }
    out: list[StepPhases] = []
    for i in range(steps.count):
        row = {name: float(values[name][i]) if name in values else 0.0 for name in PHASES if name != "other"}
        row["other"] = max(float(dur[i]) - sum(row.values()), 0.0)
        out.append(StepPhases(**row))
    return out


def cpu_step_phases(ev: TraceColumns, steps: StepWindows) -> tuple[list[StepPhases], HostRegions, PhaseSets]:
    regions = host_regions(ev, steps)
    sets = cpu_phase_sets(regions)
    return per_step(sets, steps), regions, sets


def ops_outside_work(sets: PhaseSets, steps: StepWindows) -> list[float]:
    """Per step, µs of training-thread ops in phase other (outside forward, backward, optimizer, data loading)."""
    return [round(float(x), 1) for x in intervals.lengths_within(sets.sets["other_ops"], steps.start, steps.end)]


def mean_phases(rows: list[StepPhases]) -> StepPhases | None:
    if not rows:
        return None
    n = float(len(rows))
    return StepPhases(**{name: sum(getattr(r, name) for r in rows) / n for name in PHASES})


# ---------------------------------------------------------------------------------------------- GPU traces


def launch_of(ev: TraceColumns, gpu_rows: I64) -> tuple[F64, I64]:
    """Launch time and launching thread of each GPU row (NaN / -1 when its launch is not in the trace)."""
    cpu = (ev.stream == -1) & (ev.correlation >= 0) & ev.cat_mask("cuda_runtime", "cuda_driver", "cpu_op")
    rows = np.flatnonzero(cpu)
    corr = ev.correlation[rows]
    order = np.argsort(corr, kind="stable")
    corr, rows = corr[order], rows[order]
    k = ev.correlation[gpu_rows]
    pos = np.minimum(np.searchsorted(corr, k), max(corr.size - 1, 0))
    found = (corr.size > 0) & (corr[pos] == k) if corr.size else np.zeros(k.size, dtype=bool)
    launch = rows[pos] if corr.size else np.zeros(k.size, dtype=np.int64)
    ts = np.where(found, ev.ts[launch], np.nan)
    tid = np.where(found, ev.tid[launch], -1)
    return ts, tid


def _launch_phase(ev: TraceColumns, steps: StepWindows, ts: F64, tid: I64) -> npt.NDArray[np.int8]:
    """Phase index (into PHASES) of each launch, from the launching thread's regions at that time."""
    host = ev.cat_mask(*HOST_CATS) & (ev.stream == -1)
    phase = np.full(ts.size, PHASES.index("other"), dtype=np.int8)
    backward = host & name_mask(ev, BACKWARD)
    bwd_any = np.zeros(ts.size, dtype=bool)
    for t in distinct(ev.tid[backward]).tolist():
        sel = tid == t
        if sel.any():
            bwd_any[sel] = intervals.inside(_u(ev, backward & (ev.tid == t)), ts[sel])
    main = tid == steps.tid
    data = main & intervals.inside(_u(ev, host & (ev.tid == steps.tid) & name_mask(ev, DATA)), ts)
    opt = main & intervals.inside(_u(ev, host & (ev.tid == steps.tid) & name_mask(ev, OPTIMIZER)), ts)
    step_of = steps.index_of(np.nan_to_num(ts, nan=-np.inf))
    last_bwd = np.full(steps.count, -np.inf)
    ok = bwd_any & (step_of >= 0)
    np.maximum.at(last_bwd, step_of[ok], ts[ok])
    fwd = (step_of >= 0) & (ts < last_bwd[np.maximum(step_of, 0)])
    phase[fwd] = PHASES.index("forward")
    phase[bwd_any] = PHASES.index("backward")
    phase[opt] = PHASES.index("optimizer")
    phase[data] = PHASES.index("data_loading")
    return phase


def _gpu_windows(steps: StepWindows, step_of: I64, ts: F64, end: F64) -> tuple[F64, F64]:
    """Each step's GPU window: from when the GPU could start it (its host step has begun and the previous step's
    work is done, but no later than its first kernel) to the next step's start. Idle GPU time spent waiting for
    the host to start a step thus belongs to that step."""
    first = np.full(steps.count, np.inf)
    np.minimum.at(first, step_of, ts)
    last = np.full(steps.count, -np.inf)
    np.maximum.at(last, step_of, end)
    last_end = float(end.max())
    # steps without any kernel borrow the next step's start (their GPU window is empty)
    for i in range(steps.count - 2, -1, -1):
        if not np.isfinite(first[i]):
            first[i] = first[i + 1]
    if not np.isfinite(first[-1]):
        first[-1] = last_end
    previous_done = np.concatenate(([-np.inf], np.maximum.accumulate(last)[:-1]))
    ready = np.maximum(steps.start, previous_done)
    start = np.minimum(first, np.maximum(ready, np.concatenate(([first[0]], first[:-1]))))
    start = np.minimum.accumulate(start[::-1])[::-1]
    stop = np.concatenate((start[1:], [max(last_end, float(start[-1]))]))
    return start, stop


def gpu_step_phases(
    ev: TraceColumns, steps: StepWindows, gpu_rows: I64, ktype: npt.NDArray[np.int8]
) -> list[StepPhases]:
    """Phases of each step on GPU traces (see the module docstring)."""
    found = gpu_phase_sets(ev, steps, gpu_rows, ktype)
    if found is None:
        return []
    sets, first, stop = found
    return per_step(sets, steps, (first, stop))


def gpu_phase_sets(
    ev: TraceColumns, steps: StepWindows, gpu_rows: I64, ktype: npt.NDArray[np.int8]
) -> tuple[PhaseSets, F64, F64] | None:
    """The phase sets of a GPU trace and each step's GPU window [first, stop); None when no kernel was launched
    inside a step."""
    launch_ts, launch_tid = launch_of(ev, gpu_rows)
    step_of = steps.index_of(np.nan_to_num(launch_ts, nan=-np.inf))
    mine = step_of >= 0
    if not mine.any():
        return None
    rows, ktype, step_of = gpu_rows[mine], ktype[mine], step_of[mine]
    phase = _launch_phase(ev, steps, launch_ts[mine], launch_tid[mine])
    ts = ev.ts[rows]
    end = ts + ev.dur[rows]
    first, stop = _gpu_windows(steps, step_of, ts, end)
    # each kernel's time goes to the first of: compute kernels by phase, memory kernels by phase, collectives
    names = ("backward", "forward", "optimizer", "data_loading", "other")
    level = np.full(rows.size, -1, dtype=np.int64)
    for k, kind in enumerate((KernelType.COMPUTATION, KernelType.MEMORY)):
        for j, name in enumerate(names):
            level[(ktype == kind) & (phase == PHASES.index(name))] = k * len(names) + j
    level[ktype == KernelType.COMMUNICATION] = 2 * len(names)
    ranked = level >= 0
    owned = intervals.by_first_level(ts[ranked], end[ranked], level[ranked], 2 * len(names) + 1)
    sets: dict[str, Set] = {name: intervals.union(owned[j], owned[len(names) + j]) for j, name in enumerate(names)}
    sets["communication_wait"] = owned[-1]
    taken = intervals.union(*owned)
    windows = intervals.merge(first, stop)
    idle = intervals.subtract(windows, taken)
    host = ev.cat_mask(*HOST_CATS) & (ev.stream == -1)
    waiting = intervals.intersect(idle, _u(ev, host & name_mask(ev, COMM)))
    sets["communication_wait"] = intervals.union(sets["communication_wait"], waiting)
    idle = intervals.subtract(idle, waiting)
    main = host & (ev.tid == steps.tid) & (ev.pid == steps.pid)
    loading = intervals.intersect(idle, _u(ev, main & name_mask(ev, DATA)))
    sets["data_loading"] = intervals.union(sets["data_loading"], loading)
    sets.pop("other")
    return PhaseSets(sets), first, stop
