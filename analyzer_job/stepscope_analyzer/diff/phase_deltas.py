"""Step phases (contract StepPhases: data loading, forward, backward, optimizer, communication wait, other) on
both sides, job-wide and per rank. Reports made before phases existed carry none: then there is nothing to
compare and the diff says so. Pure.
"""

from __future__ import annotations

from stepscope_contract.diff import PhaseDelta
from stepscope_contract.report import RankReport, StepPhases

PHASES: tuple[str, ...] = tuple(StepPhases.model_fields)
MAX_PHASE_US = 1e12
"""a phase beyond this (or not finite) in a report.json is not a measurement: that rank's phases are left out"""


def mean_phases(ranks: list[RankReport]) -> dict[str, float] | None:
    """Mean over the ranks that carry phases of their mean µs per step in each phase; None when none does."""
    rows = [
        r.phases
        for r in ranks
        if r.phases is not None and all(0.0 <= getattr(r.phases, p) <= MAX_PHASE_US for p in PHASES)
    ]
    if not rows:
        return None
    return {p: sum(getattr(row, p) for row in rows) / len(rows) for p in PHASES}


def phase_deltas(baseline: dict[str, float] | None, candidate: dict[str, float] | None) -> list[PhaseDelta]:
    if baseline is None or candidate is None:
        return []
    return [
        PhaseDelta(phase=p, baseline_us=baseline[p], candidate_us=candidate[p], delta_us=candidate[p] - baseline[p])
        for p in PHASES
    ]
