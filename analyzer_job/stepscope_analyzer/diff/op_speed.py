"""How much slower or faster per call the work that did not change ran: the ops and kernels present on both sides
with the same calls per step. Pure.

Two recordings of the same code on a shared machine differ by whatever the machine did meanwhile (other tenants, CPU
frequency, a noisy neighbour): that moves every op's time per call together. A code change moves the ops it touches
(new calls, other shapes, a slower kernel) and leaves the rest. So the time-weighted median of the unchanged ops'
per-call ratios tells a pipeline whether a step difference came with every op moving alike. It is information, not
a correction: a change that slows every op (a library built without vector instructions, other thread settings)
moves them alike too, and the step also holds time blocked in collectives, which moves on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepscope_analyzer.analyses.phase_names import COMM, STEP
from stepscope_analyzer.diff.name_deltas import NameTimes

KINDS = frozenset({"cpu_op", "kernel"})
"""the per-call work compared (communication, memory copies and annotations are left out)"""
SAME_CALLS = 0.01
"""calls per step may differ by this share and still count as unchanged"""
MIN_OPS = 5
MIN_SHARE = 0.2
"""the unchanged ops must hold at least this share of the baseline's compared op time per step"""


@dataclass(frozen=True)
class OpSpeed:
    pct: float
    """candidate per-call time over baseline's, minus 1, in % (time-weighted median over the ops)"""
    ops: int
    share: float
    """share of the baseline's compared op time per step that the unchanged ops hold"""


def unchanged_op_speed(baseline: NameTimes, candidate: NameTimes) -> OpSpeed | None:
    """The per-call change of the unchanged ops, or None when too few ops are unchanged to say."""
    rows: list[tuple[float, float]] = []
    total = 0.0
    for key in baseline.us:
        kind, name = key
        if kind not in KINDS or COMM.search(name) or STEP.search(name):  # collectives and step spans are not work
            continue
        b_us, b_calls = baseline.per_step(key)
        total += b_us
        if key not in candidate.us:
            continue
        c_us, c_calls = candidate.per_step(key)
        if b_us <= 0 or c_us <= 0 or b_calls <= 0 or abs(c_calls - b_calls) > SAME_CALLS * b_calls:
            continue
        rows.append((math.log((c_us / c_calls) / (b_us / b_calls)), b_us))
    weight = sum(w for _, w in rows)
    if len(rows) < MIN_OPS or total <= 0 or weight < MIN_SHARE * total:
        return None
    rows.sort()
    half, seen = weight / 2.0, 0.0
    for log_ratio, w in rows:
        seen += w
        if seen >= half:
            return OpSpeed(pct=100.0 * math.expm1(log_ratio), ops=len(rows), share=weight / total)
    raise AssertionError("unreachable: the weights sum to more than half of themselves")
