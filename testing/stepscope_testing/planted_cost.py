"""What a planted fault costs the job, measured in the run that recorded it: after the recorded steps, the job runs
unprofiled cycles of steps with the fault switched off and on in turn (off, on, on, off: a drift of the machine's
load over a cycle weighs on both states alike), and the planted cost is the mean of the cycles' own differences
(the steps with the fault less those without), with an interval of two standard errors over the cycles. A recorded
job's truth names the ranks where the fault was planted; this says whether, and how surely, the job pays for it at
least the user's floor, independently of the diagnosis (bench/diagnosis_accuracy.py scores the diagnosis against
it where the interval is clear of the floor). Pure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

ORDER = (False, True, True, False)
"""the fault's state over one cycle of calibration steps"""


def armed(step: int) -> bool:
    """Whether the fault is on in calibration step `step` (ORDER, repeated)."""
    return ORDER[step % len(ORDER)]


def planted_cost(steps_us: Sequence[float]) -> dict[str, Any]:
    """The calibration from each step's wall-clock time, in the order of ORDER repeated (whole cycles only): the
    median step with the fault off and on, the cost per step (cost_us: the mean of the cycles' own differences,
    low_us and high_us two standard errors either side; with one cycle, the cycle's difference alone), and the cost's
    share of the median step with the fault on (cost_share, low_share, high_share)."""
    n = len(steps_us) // len(ORDER)
    if n < 1:
        raise ValueError("the calibration needs at least one cycle of steps with the fault off and on")
    steps = list(steps_us[: n * len(ORDER)])
    cycles = [steps[i * len(ORDER) : (i + 1) * len(ORDER)] for i in range(n)]
    own = [sum(t if armed(k) else -t for k, t in enumerate(c)) / 2 for c in cycles]
    cost = statistics.fmean(own)
    error = 2 * statistics.stdev(own) / math.sqrt(n) if n > 1 else 0.0
    on_us = statistics.median(t for i, t in enumerate(steps) if armed(i))
    off_us = statistics.median(t for i, t in enumerate(steps) if not armed(i))

    def share(value: float) -> float:
        return round(value / on_us, 4) if on_us > 0 else 0.0

    return {
        "steps_off_us": round(off_us, 1),
        "steps_on_us": round(on_us, 1),
        "cost_us": round(cost, 1),
        "low_us": round(cost - error, 1),
        "high_us": round(cost + error, 1),
        "cost_share": share(cost),
        "low_share": share(cost - error),
        "high_share": share(cost + error),
        "cycles": n,
    }


def must_be_named(cost: dict[str, Any], floor_share: float) -> bool | None:
    """What a diagnosis should say of a fault with this calibration (`planted_cost`'s output) under a floor of
    `floor_share` of the step: True (name it) where the whole interval is at or above the floor, False (do not) where
    it is below, None where the interval holds the floor (either answer stands)."""
    if cost["low_share"] >= floor_share:
        return True
    if cost["high_share"] < floor_share:
        return False
    return None


__all__ = ["ORDER", "armed", "must_be_named", "planted_cost"]
