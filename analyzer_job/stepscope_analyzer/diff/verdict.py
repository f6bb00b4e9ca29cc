"""The gate's rule, in one place (README "Comparing with a baseline", docs/ci.md "How sure the gate is"). Pure.

- regressed: the lower end of the steps' interval (at equal op speed by default, else measured) is above the gate,
  or the lower end of the added work's interval is: slower than allowed, with (1 + confidence) / 2 one-sided
  confidence, by either evidence;
- improved: otherwise, when the upper end of the steps' interval is below the gate's mirror
  (1 / (1 + gate) - 1: swapping the sides of a regressed pair gives an improvement);
- passed: anything else; unusable when a side has too few steps for an interval.
The reason states the numbers decided on, and only those. The steps' noise is half the width of their interval:
what is smaller than it (the added work of a pass, a name's change in compare.py) is within noise and not told as
a change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepscope_analyzer.diff.shift_interval import Shift
from stepscope_contract.diff import AddedWork, DiffVerdict

MIN_STEPS = 3
STEPS = "steps"
ADDED_WORK = "added_work"


@dataclass(frozen=True)
class Decision:
    verdict: DiffVerdict
    reason: str
    decided_by: list[str]
    noise_pct: float | None = None
    """half the width of the steps' interval decided on, in %: a change smaller than this is within noise"""


def pct(log_ratio: float | None) -> float | None:
    return None if log_ratio is None else 100.0 * math.expm1(log_ratio)


def interval_text(level: str, low: float, high: float) -> str:
    """An interval as every output names it: its two-sided level, and the one-sided level of its lower end (what
    the gate decides on)."""
    return f"{level} interval {low:+.1f}% to {high:+.1f}%"


def _way(pct_value: float) -> str:
    return f"{pct_value:.1f}% slower" if pct_value >= 0 else f"{-pct_value:.1f}% faster"


def steps_text(est: float, low: float, high: float, level: str, *, adjusted: bool, measured_pct: float | None) -> str:
    """The steps' figure in words. Measured steps are told slower or faster; the figure at equal op speed (the
    machine's speed, read from the ops the candidate did not change, taken out) is told as a signed number beside
    the measured one, so a run measured faster never reads "slower"."""
    interval = interval_text(level, low, high)
    if not adjusted:
        return f"steps are {_way(est)} than the baseline ({interval})"
    measured = f"measured steps are {_way(measured_pct)} than the baseline; " if measured_pct is not None else ""
    return f"{measured}at equal op speed (the machine's speed taken out) {est:+.1f}% ({interval})"


def added_text(added: AddedWork | None) -> str:
    if added is None:
        return ""
    interval = (
        f" ({added.ci_low_pct:+.1f}% to {added.ci_high_pct:+.1f}%)"
        if added.ci_low_pct is not None and added.ci_high_pct is not None
        else ""
    )
    where = f" on rank {added.rank}" if added.rank is not None else ""
    names = f": {', '.join(n[:60] for n in added.names[:3])}" if added.names else ""
    return f"; added work +{added.pct:.1f}% of the rest of the step{interval}{where}{names}"


def decide(
    steps: Shift | None,
    counts: tuple[int, int],
    added: AddedWork | None,
    gate: float,
    confidence: float,
    *,
    adjusted: bool,
    measured_pct: float | None,
) -> Decision:
    """The verdict on the steps' shift (`adjusted`: at equal op speed) and the added work."""
    level = f"{confidence:.0%}"
    if min(counts) < MIN_STEPS or steps is None:
        return Decision(
            DiffVerdict.UNUSABLE,
            f"too few steps to compare (baseline {counts[0]}, candidate {counts[1]}; the gate needs at least "
            f"{MIN_STEPS} per side): record more steps",
            [],
        )
    est, low, high = pct(steps.estimate) or 0.0, pct(steps.low), pct(steps.high)
    if low is None or high is None:
        return Decision(
            DiffVerdict.UNUSABLE, f"{counts[0]} and {counts[1]} steps are too few for a {level} interval", []
        )
    text = steps_text(est, low, high, level, adjusted=adjusted, measured_pct=measured_pct)
    noise = (high - low) / 2.0
    noted = added if added is not None and added.pct > noise else None  # within noise: not told as a change
    by = [STEPS] if low > gate else []
    if added is not None and added.ci_low_pct is not None and added.ci_low_pct > gate:
        by.append(ADDED_WORK)
    if by:
        return Decision(DiffVerdict.REGRESSED, f"{text}{added_text(added)}: more than the {gate:g}% allowed", by, noise)
    if high < -100.0 * gate / (100.0 + gate):
        return Decision(DiffVerdict.IMPROVED, text, [STEPS], noise)
    return Decision(DiffVerdict.PASSED, f"{text}{added_text(noted)}: not shown to exceed {gate:g}%", [], noise)
