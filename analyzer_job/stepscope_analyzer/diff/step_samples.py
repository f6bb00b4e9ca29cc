"""The step-time samples the gate compares: one value per job step, from every analysed rank's step durations.

Ranks of a synchronous job share each step (they meet in its collectives), so their durations of step k are one
observation of the job, not world-size independent ones: counting them apart would make the interval too narrow.
Step k of the job is the median over the ranks of their k-th recorded step; a rank with fewer steps stops
contributing after its last one. Values are natural logs of µs, so a shift is a ratio. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stepscope_contract.report import RankReport, RankStatus, Report

MAX_STEPS_PER_RANK = 1000
"""the contract's most recorded steps (CaptureOptions.steps); more in a report.json are cut"""
MIN_STEP_US = 1e-3
MAX_STEP_US = 1e12
"""durations outside [1 ns, ~11.6 days] are not steps (a hostile or broken report.json): left out"""


@dataclass(frozen=True)
class StepSamples:
    log_us: list[float]
    ranks: int
    """ranks that contributed"""


def analysed_ranks(report: Report) -> list[RankReport]:
    """Ranks with status ok and at least one recorded step duration."""
    return [r for r in report.ranks if r.status is RankStatus.OK and any(d > 0 for d in r.steps.durations_us)]


def job_steps(report: Report) -> StepSamples:
    rows = [
        [d for d in r.steps.durations_us[:MAX_STEPS_PER_RANK] if MIN_STEP_US <= d <= MAX_STEP_US]
        for r in analysed_ranks(report)
    ]
    rows = [row for row in rows if row]
    longest = max((len(row) for row in rows), default=0)
    samples = []
    for k in range(longest):
        column = [row[k] for row in rows if k < len(row)]
        samples.append(math.log(float(np.median(column))))
    return StepSamples(samples, len(rows))


def median_and_p90(report: Report) -> tuple[float, float]:
    """The report's own job step numbers (Diagnosis), else the same definition over its ranks' steps."""
    d = report.diagnosis
    if MIN_STEP_US <= d.median_step_us <= MAX_STEP_US and MIN_STEP_US <= d.p90_step_us <= MAX_STEP_US:
        return d.median_step_us, d.p90_step_us
    values = [
        v
        for r in analysed_ranks(report)
        for v in r.steps.durations_us[:MAX_STEPS_PER_RANK]
        if MIN_STEP_US <= v <= MAX_STEP_US
    ]
    if not values:
        return 0.0, 0.0
    arr = np.asarray(values, dtype=np.float64)
    return float(np.median(arr)), float(np.percentile(arr, 90))
