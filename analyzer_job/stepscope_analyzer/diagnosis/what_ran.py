"""A slow rank's cause from what ran in its excess, not from the phase it fell in. Pure.

The phases say where in the step the time went; the cause says what kind of work it was. Tensor ops (CPU ops,
kernels) are compute whatever phase they run in: matrix work a rank does between backward and the optimizer step
lands in phase `other`, which alone would read as host time. Python, I/O, sleeps, GC and data loading stay host
time. A host excess is compute when the rank's tensor ops outside the step's work (RankReport.step_ops_outside_work,
per step) exceed the other ranks' by more than OPS_SHARE of it."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.report import Cause, Evidence, RankReport

OPS_SHARE = 0.5
"""share of a host excess that tensor ops must make up for it to be compute"""


def ops_outside_work(r: RankReport) -> float | None:
    """The rank's median µs per step of tensor ops outside the step's work; None when not measured."""
    values = r.step_ops_outside_work
    if not values or len(values) != r.steps.count:
        return None
    return median(list(values))


OPS_LABEL = "tensor ops per step outside forward/backward/optimizer"


def _mine_and_theirs(ranks: dict[int, RankReport], rank: int) -> tuple[float, float] | None:
    mine = ops_outside_work(ranks[rank])
    if mine is None:
        return None
    theirs = [v for k, r in ranks.items() if k != rank and (v := ops_outside_work(r)) is not None]
    return mine, median(theirs) if theirs else 0.0


def ops_evidence(ranks: dict[int, RankReport], rank: int) -> Evidence | None:
    """The rank's tensor ops outside the step's work against the other ranks' (per step, medians)."""
    both = _mine_and_theirs(ranks, rank)
    if both is None:
        return None
    mine, theirs = both
    detail = (
        f"{mine / 1000:,.2f} ms per step of tensor ops run outside forward/backward/optimizer vs "
        f"{theirs / 1000:,.2f} ms on the other ranks: the excess is compute, not host time"
    )
    return Evidence(metric=OPS_LABEL, value=mine, baseline=theirs, detail=detail)


def by_what_ran(ranks: dict[int, RankReport], rank: int, cause: Cause, excess_us: float) -> Cause:
    """`cause` (from the cost that stood out), or compute when a host excess is mostly tensor ops."""
    if cause is not Cause.HOST or excess_us <= 0:
        return cause
    both = _mine_and_theirs(ranks, rank)
    if both is None:
        return cause
    mine, theirs = both
    return Cause.COMPUTE if mine - theirs > OPS_SHARE * excess_us else cause
