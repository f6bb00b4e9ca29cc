"""The training thread's op calls at their least own time over the recorded steps, per call slot. Pure.

A slot is the k-th call of an op name in a step; in a job that repeats its steps every step has the same slots.
Waiting for a CPU stretches some calls in some steps, so a slot's least time over the steps is its cost without
contention, unless it was stretched in every step. Comparing these floors slot by slot across ranks tells a rank
that does more work per call (a larger batch) from one that waits for a CPU (diagnosis.floor_test). The floors
over the even and over the odd steps alone say how reproducible they are: equal for fixed-shape work, apart for
variable-length inputs, whose floors follow the shortest input a rank drew.
"""

from __future__ import annotations

import numpy as np

from stepscope_analyzer.analyses.cpu_contention import CallSlots, call_slots, slot_least
from stepscope_analyzer.analyses.step_phases import StepWindows
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import CallFloors

MAX_CALLS = 128
"""the slots with the largest floors kept per rank (the report's size stays bounded)"""
MIN_STEPS = 4
"""two steps at least in each half"""


def call_floors(ev: TraceColumns, steps: StepWindows, calls: CallSlots | None = None) -> CallFloors | None:
    """Floors of the slots present in every recorded step, the largest first; None with fewer than MIN_STEPS.
    `calls`: the steps' call_slots when already computed."""
    if steps.count < MIN_STEPS:
        return None
    calls = call_slots(ev, steps) if calls is None else calls
    if calls.own.size == 0:
        return None
    present = np.bincount(calls.slot, minlength=calls.name_id.size) == steps.count
    even = np.arange(steps.count) % 2 == 0
    least, least_even, least_odd = slot_least(calls), slot_least(calls, even), slot_least(calls, ~even)
    kept = np.flatnonzero(present & (least > 0))
    total = float(least[kept].sum())
    kept = kept[np.argsort(-least[kept], kind="stable")][:MAX_CALLS]
    return CallFloors(
        total_us=round(total, 1),
        calls=[f"{ev.names[int(calls.name_id[i])]}#{int(calls.nth[i])}" for i in kept.tolist()],
        floor_us=[round(float(x), 1) for x in least[kept]],
        even_us=[round(float(x), 1) for x in least_even[kept]],
        odd_us=[round(float(x), 1) for x in least_odd[kept]],
        steps=steps.count,
    )
