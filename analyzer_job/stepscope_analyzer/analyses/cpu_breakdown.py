"""The CPU analogue of HTA's breakdowns, for CPU-only (e.g. gloo) traces.

Definitions (all µs, over the window from the first ProfilerStep's start to the last one's end, or the whole trace
span when there are no steps):
- training threads: the threads that run ProfilerStep#N (else the thread with the most cpu_op time);
- communication: events named ``gloo:*``, ``c10d::*``, ``_c10d_functional::*``, ``nccl:*`` or
  ``record_param_comms`` on any thread;
- compute: cpu_op intervals on the training threads outside communication (union, so nesting counts once);
- busy: union of everything on the training threads (ops, Python functions, annotations other than
  ProfilerStep) and of communication anywhere; idle = window - busy;
- kernel_time = window, non_compute = window - compute - idle (communication and other host work);
- idle gaps on the busy timeline: < 30 µs is ``kernel_wait`` (dispatch overhead), the rest ``other``; CPU traces
  have no launch/queue relation, so ``host_wait`` stays 0;
- comp_comm_overlap = |communication ∩ compute| / |communication|;
- host_time: busy time on the training threads inside annotations or Python functions but outside every op and
  collective (a DataLoader's ``__next__`` or a ``record_function("load_batch")`` waiting for input, Python overhead):
  host-side work that is neither compute nor communication nor idle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.analyses.gpu_breakdown import CONSECUTIVE_KERNEL_DELAY_US
from stepscope_analyzer.analyses.sorted_values import distinct
from stepscope_analyzer.analyses.steps import step_rows
from stepscope_analyzer.parse import TraceColumns

F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Union = tuple[F64, F64]

COMM_NAME = re.compile(r"^(gloo:|c10d::|_?c10d_functional::|nccl:|record_param_comms$)")
HOST_CATS = ("cpu_op", "python_function", "user_annotation", "cuda_runtime", "cuda_driver")


@dataclass
class CpuBreakdown:
    window: tuple[float, float]
    train_mask: Mask
    comm_mask: Mask
    compute_mask: Mask
    compute_union: Union
    comm_union: Union
    idle_time: float
    compute_time: float
    non_compute_time: float
    kernel_wait: float
    other_idle: float
    host_gap_time: float
    host_time: float = 0.0

    @property
    def kernel_time(self) -> float:
        return self.window[1] - self.window[0]


def _clip(u: Union, lo: float, hi: float) -> Union:
    s = np.clip(u[0], lo, hi)
    e = np.clip(u[1], lo, hi)
    keep = e > s
    return s[keep], e[keep]


def training_threads(ev: TraceColumns, steps: npt.NDArray[np.int64]) -> Mask:
    if steps.size:
        tids = distinct(ev.tid[steps])
        pids = distinct(ev.pid[steps])
        mask: Mask = np.isin(ev.tid, tids) & np.isin(ev.pid, pids)
        return mask
    cpu_op = ev.cat_mask("cpu_op")
    if not cpu_op.any():
        return np.zeros(len(ev), dtype=bool)
    tids, inv = np.unique(ev.tid[cpu_op], return_inverse=True)
    busiest = tids[int(np.argmax(np.bincount(inv, weights=ev.dur[cpu_op])))]
    busiest_mask: Mask = ev.tid == busiest
    return busiest_mask


def comm_mask(ev: TraceColumns) -> Mask:
    ids = [i for i, n in enumerate(ev.names) if COMM_NAME.match(n)]
    mask: Mask = ev.name_mask(ids) & (ev.stream == -1)
    return mask


def cpu_breakdown(ev: TraceColumns) -> CpuBreakdown:
    steps = step_rows(ev)
    end = ev.ts + ev.dur
    host = ev.cat_mask(*HOST_CATS) & (ev.stream == -1)
    if steps.size:
        lo, hi = float(ev.ts[steps].min()), float(end[steps].max())
    elif host.any():
        lo, hi = float(ev.ts[host].min()), float(end[host].max())
    else:
        lo = hi = 0.0
    train = training_threads(ev, steps) & host
    comm = comm_mask(ev)
    step_mask = np.zeros(len(ev), dtype=bool)
    step_mask[steps] = True
    compute = train & ev.cat_mask("cpu_op") & ~comm
    comm_u = _clip(intervals.merge(ev.ts[comm], end[comm]), lo, hi)
    comm_train = comm & train
    comm_train_u = _clip(intervals.merge(ev.ts[comm_train], end[comm_train]), lo, hi)
    comp_u_raw = _clip(intervals.merge(ev.ts[compute], end[compute]), lo, hi)
    compute_time = intervals.length(*comp_u_raw) - intervals.intersection_length(comp_u_raw, comm_train_u)
    busy_rows = (train & ~step_mask) | comm
    busy_u = _clip(intervals.merge(ev.ts[busy_rows], end[busy_rows]), lo, hi)
    op_rows = (train & ev.cat_mask("cpu_op")) | comm
    op_u = _clip(intervals.merge(ev.ts[op_rows], end[op_rows]), lo, hi)
    host_time = max(0.0, intervals.length(*busy_u) - intervals.intersection_length(busy_u, op_u))
    window = hi - lo
    idle = window - intervals.length(*busy_u)
    # idle gaps between busy intervals (and at the window's edges)
    edges_s = np.concatenate(([lo], busy_u[1]))
    edges_e = np.concatenate((busy_u[0], [hi]))
    gaps = edges_e - edges_s
    gaps = gaps[gaps > 0]
    kernel_wait = float(gaps[gaps < CONSECUTIVE_KERNEL_DELAY_US].sum())
    # host gap: per step, time from the step's start to its first piece of work on the training thread
    host_gap = 0.0
    work = train & ~step_mask
    work_ts = np.sort(ev.ts[work])
    for row in steps.tolist():
        s, e = float(ev.ts[row]), float(end[row])
        i = int(np.searchsorted(work_ts, s, side="left"))
        first = float(work_ts[i]) if i < work_ts.size else e
        host_gap += max(0.0, min(first, e) - s)
    return CpuBreakdown(
        window=(lo, hi),
        train_mask=train,
        comm_mask=comm,
        compute_mask=compute,
        compute_union=_subtract(comp_u_raw, comm_train_u),
        comm_union=comm_u,
        idle_time=idle,
        compute_time=compute_time,
        non_compute_time=window - compute_time - idle,
        kernel_wait=kernel_wait,
        other_idle=idle - kernel_wait,
        host_gap_time=host_gap,
        host_time=host_time,
    )


def _subtract(a: Union, b: Union) -> Union:
    """A minus B for disjoint sorted interval sets."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    points = np.concatenate((a[0], a[1], b[0], b[1]))
    points = distinct(points)
    mids = (points[:-1] + points[1:]) / 2
    in_a = _inside(a, mids)
    in_b = _inside(b, mids)
    keep = in_a & ~in_b
    return intervals.merge(points[:-1][keep], points[1:][keep])


def _inside(u: Union, x: F64) -> Mask:
    idx = np.searchsorted(u[0], x, side="right") - 1
    safe = np.maximum(idx, 0)
    return (idx >= 0) & (x < u[1][safe])
