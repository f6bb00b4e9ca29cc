"""How much a CPU rank's training thread was slowed by waiting for a CPU, per recorded step. Pure.

On a shared or oversubscribed CPU a process is descheduled now and then: an op that normally takes 0.5 ms takes
30 ms once. Such stretches land on whichever rank the scheduler picks, often the same one for many steps, and make
its wall-clock compute and host time look several times the others' in a perfectly balanced job. Ops repeat every
step, so each op call (the k-th call of an op name inside a step) can be compared with the same call in other steps.
Each call is measured by its own time (its duration minus its child ops'), where a stretch lands, against its
least over the steps. What a call takes beyond a quarter more than that (and beyond 20 µs more) is taken as waiting for
the CPU, not as the op's cost. A step's dilation is its ops' own time over that time without the excess
(1.0: no contention). A rank that really computes more (a larger batch, a slower device) has every call longer in
every step, so the least of each call grows with it and its dilation stays near 1.

That inference misses a rank that waits for a CPU in every step alike (the scheduler keeps it on the core of a
process that burns CPU): its least call is stretched too. Where stepscope's hook recorded the training thread's
own CPU wait per step (Linux schedstat, the trace's `stepscopeCpu` block), the step's dilation is at least its
active time (the step less its blocked wait in collectives) over that time less the measured wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.analyses.phase_names import COMM, name_mask
from stepscope_analyzer.analyses.step_phases import StepWindows
from stepscope_analyzer.analyses.steps import step_number
from stepscope_analyzer.parse import TraceColumns

F64 = npt.NDArray[np.float64]
STRETCH = 1.25
MIN_EXCESS_US = 20.0
MEASURED_KEY = "stepscopeCpu"
MAX_WAIT_SHARE = 0.95
"""a measured wait is taken as at most this share of the step's active time (clock edges, rounding)"""


def _self_times(ev: TraceColumns, steps: StepWindows) -> tuple[npt.NDArray[np.int64], F64]:
    """cpu_ops of the training thread but collectives, in time order, and each one's own time (its duration minus
    its children's, a collective among them: an op that waits inside it for a peer does not work meanwhile)."""
    rows = np.flatnonzero(ev.cat_mask("cpu_op") & (ev.pid == steps.pid) & (ev.tid == steps.tid) & (ev.stream == -1))
    rows = rows[intervals.nesting_order(ev.ts[rows], ev.dur[rows])]
    ts = ev.ts[rows].tolist()
    dur = ev.dur[rows].tolist()
    own = list(dur)
    stack: list[int] = []
    for i, (t, d) in enumerate(zip(ts, dur, strict=True)):
        while stack and ts[stack[-1]] + dur[stack[-1]] <= t:
            stack.pop()
        if stack:
            own[stack[-1]] -= d
        stack.append(i)
    work = ~name_mask(ev, COMM)[rows]
    return rows[work], np.maximum(np.asarray(own, dtype=np.float64), 0.0)[work]


@dataclass(frozen=True)
class CallSlots:
    """The training thread's op calls inside the recorded steps, each with its own time and its slot: the k-th call
    of its op name in its step (the same slot in every step of a job that repeats its steps)."""

    step: npt.NDArray[np.int64]
    own: F64
    slot: npt.NDArray[np.int64]
    """index into `name_id`/`nth` of each call's slot"""
    name_id: npt.NDArray[np.int32]
    nth: npt.NDArray[np.int64]


def call_slots(ev: TraceColumns, steps: StepWindows) -> CallSlots:
    leaves, own = _self_times(ev, steps)
    step = steps.index_of(ev.ts[leaves])
    leaves, own, step = leaves[step >= 0], own[step >= 0], step[step >= 0]
    names = ev.name_id[leaves]
    order = np.lexsort((ev.ts[leaves], names, step))
    leaves, step, names, own = leaves[order], step[order], names[order], own[order]
    if leaves.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return CallSlots(empty, own, empty, names, empty)
    new_group = np.ones(leaves.size, dtype=bool)
    new_group[1:] = (step[1:] != step[:-1]) | (names[1:] != names[:-1])
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(leaves.size), 0))
    nth = np.arange(leaves.size) - group_start  # the k-th call of this name in its step
    key = names.astype(np.int64) * (int(nth.max()) + 1) + nth
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return CallSlots(step, own, inverse.astype(np.int64), names[first], nth[first].astype(np.int64))


def slot_least(calls: CallSlots, steps: npt.NDArray[np.bool_] | None = None) -> F64:
    """Per slot, its call's least own time over the steps (those where `steps` is True; inf where it has none)."""
    least = np.full(calls.name_id.size, np.inf)
    keep = slice(None) if steps is None else steps[calls.step]
    np.minimum.at(least, calls.slot[keep], calls.own[keep])
    return least


def step_dilation(ev: TraceColumns, steps: StepWindows, calls: CallSlots | None = None) -> list[float]:
    """Per recorded step, the ops' own time over that time without CPU-wait stretches (>= 1); `calls`: the step's
    call_slots when already computed."""
    calls = call_slots(ev, steps) if calls is None else calls
    if calls.own.size == 0 or steps.count < 3:
        return [1.0] * steps.count
    t = slot_least(calls)[calls.slot]
    dur = calls.own
    excess = np.maximum(dur - np.maximum(STRETCH * t, t + MIN_EXCESS_US), 0.0)
    wall = np.bincount(calls.step, weights=dur, minlength=steps.count)
    stretched = np.bincount(calls.step, weights=excess, minlength=steps.count)
    own = np.maximum(wall - stretched, 1e-9)
    return [float(x) for x in np.where(wall > 0, wall / own, 1.0)]


def measured_waits(metadata: dict[str, Any], step_names: list[str]) -> list[float] | None:
    """Per recorded step (by its ProfilerStep#i name), the training thread's measured CPU wait in µs, from the
    hook's `stepscopeCpu` block; None when the trace has none or it does not cover every step."""
    block = metadata.get(MEASURED_KEY)
    rows = block.get("steps") if isinstance(block, dict) else None
    if not isinstance(rows, list):
        return None
    wait_of: dict[int, float] = {}
    for row in rows:
        if isinstance(row, list) and len(row) >= 3 and all(type(x) is int and x >= 0 for x in row[:3]):
            wait_of[row[0]] = float(row[2])
    out: list[float] = []
    for name in step_names:
        n = step_number(name)
        if n is None or n not in wait_of:
            return None
        out.append(wait_of[n])
    return out


def with_measured_waits(inferred: list[float], waits: list[float], active_us: list[float]) -> list[float]:
    """Each step's dilation: the larger of the inferred one and active / (active - measured wait)."""
    out: list[float] = []
    for d, wait, active in zip(inferred, waits, active_us, strict=True):
        if active <= 0:
            out.append(d)
            continue
        left = active - min(wait, MAX_WAIT_SHARE * active)
        out.append(max(d, active / left))
    return out
