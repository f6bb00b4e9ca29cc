"""A ProfileTrigger's conditions as pure functions over the ranks' step series (contract `RankSteps`).

Noise-robust by construction, because steps on a shared machine jitter by tens of percent and a single step can be
ten times the others (a checkpoint, a page fault storm, a neighbour): every judgement is a median over a window of
steps, and the window's steps must also mostly agree -- at least HOLD_FRACTION of them beyond the threshold -- so one
burst never fires. Steps that ran during a capture (and the one that exported its trace) are left out: profiling is
slower by design. A straggler must also cost at least MIN_EXCESS_OF_STEP of a step, so that microseconds of own time
in a job that spends its whole step in backward() are never one.

- stall: a rank whose process still runs saw no step boundary for `seconds` (measured on its own host's clock).
- straggler: a rank's median own time (or step time) over its last `steps` steps exceeds the median of the other
  ranks' medians by more than `thresholdPercent`. Own time is the step outside backward(): in a synchronous job
  every rank's step lasts as long as the slowest one's, and only the time before it waits tells them apart.
- step time regression: the job's step time (per step, the median over ranks, aligned from the newest step) over the
  last `steps` steps exceeds the median of the `baselineSteps` before them by more than `thresholdPercent`. The
  baseline rolls: a slowdown that lasts becomes the new normal, and the condition clears. A baseline that is empty or
  of 0 ms is not judged (a note says so).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from stepscope_contract.ranks import format_rank_set
from stepscope_contract.step_telemetry import RankSteps
from stepscope_contract.trigger import (
    Stall,
    StepTimeRegression,
    Straggler,
    StragglerMeasure,
    TriggerCondition,
    TriggerConditions,
)

HOLD_FRACTION = 0.75
MIN_EXCESS_OF_STEP = 0.05
PRIORITY = (TriggerCondition.STALL, TriggerCondition.STRAGGLER, TriggerCondition.STEP_TIME_REGRESSION)


@dataclass(frozen=True)
class Finding:
    """A condition that holds, and why, in a sentence."""

    condition: TriggerCondition
    message: str
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """Every condition the trigger has, judged over one pull of telemetry."""

    findings: tuple[Finding, ...] = ()  # most specific first (PRIORITY)
    notes: tuple[str, ...] = field(default_factory=tuple)  # conditions that could not be judged, and why

    @property
    def first(self) -> Finding | None:
        return self.findings[0] if self.findings else None


def _normal(series: RankSteps, values: Sequence[float]) -> list[float]:
    """`values` (one per step of `series`) of the steps that ran without a capture in hand."""
    flags = series.profiled if len(series.profiled) == len(values) else [False] * len(values)
    return [v for v, profiled in zip(values, flags, strict=True) if not profiled]


def _share_above(values: Sequence[float], threshold: float) -> float:
    return sum(1 for v in values if v > threshold) / len(values) if values else 0.0


def stall(ranks: Sequence[RankSteps], spec: Stall) -> Finding | None:
    stalled = [
        (r.rank, r.seconds_since_last_step or 0.0)
        for r in ranks
        if not r.closed and r.steps_total > 0 and (r.seconds_since_last_step or 0.0) >= spec.seconds
    ]
    if not stalled:
        return None
    which = sorted(rank for rank, _ in stalled)
    longest = max(seconds for _, seconds in stalled)
    label = f"rank {which[0]}" if len(which) == 1 else f"ranks {format_rank_set(which)}"
    return Finding(
        TriggerCondition.STALL,
        f"no step on {label} for {longest:.0f} s (stall.seconds {spec.seconds})",
        tuple(which),
    )


def _measure(series: RankSteps, measure: StragglerMeasure) -> list[float]:
    values = series.own_ms() if measure is StragglerMeasure.OWN_TIME else list(series.duration_ms)
    return _normal(series, values)


def straggler(ranks: Sequence[RankSteps], spec: Straggler) -> tuple[Finding | None, str]:
    """(the straggler, '') or (None, why it could not be judged, '' when it could)."""
    windows = {r.rank: _measure(r, spec.measure)[-spec.steps :] for r in ranks}
    ready = {rank: values for rank, values in windows.items() if len(values) >= spec.steps}
    if len(ready) < 2:
        return None, f"straggler: {len(ready)} rank(s) with {spec.steps} normal steps, 2 needed"
    medians = {rank: statistics.median(values) for rank, values in ready.items()}
    step_ms = statistics.median(
        statistics.median(_normal(r, r.duration_ms)[-spec.steps :]) for r in ranks if r.rank in ready
    )
    worst: tuple[float, int, float, float, int] | None = None
    for rank, values in ready.items():
        others = statistics.median(m for other, m in medians.items() if other != rank)
        threshold = others * (1.0 + spec.threshold_percent / 100.0)
        excess = medians[rank] - others
        if medians[rank] <= threshold or excess < MIN_EXCESS_OF_STEP * step_ms:
            continue
        if _share_above(values, threshold) < HOLD_FRACTION:
            continue
        ratio = medians[rank] / others if others > 0 else float("inf")
        if worst is None or ratio > worst[0]:
            worst = (ratio, rank, others, threshold, sum(1 for v in values if v > threshold))
    if worst is None:
        return None, ""
    ratio, rank, others, threshold, above = worst
    what = "own time" if spec.measure is StragglerMeasure.OWN_TIME else "step time"
    shown = f"{ratio:.2f}x" if ratio != float("inf") else "far above"
    return (
        Finding(
            TriggerCondition.STRAGGLER,
            f"rank {rank}'s {what} over its last {spec.steps} steps is {medians[rank]:.1f} ms, {shown} the median of "
            f"the other ranks ({others:.1f} ms); {above} of {spec.steps} steps above {threshold:.1f} ms "
            f"(+{spec.threshold_percent:g}%)",
            (rank,),
        ),
        "",
    )


def job_step_series(ranks: Sequence[RankSteps], length: int, minimum: int) -> list[float]:
    """The job's step times, oldest first: per step, the median over the ranks (their series aligned at the newest
    normal step); ranks with fewer than `minimum` normal steps are left out; at most `length` steps."""
    series = [_normal(r, r.duration_ms)[-length:] for r in ranks]
    series = [s for s in series if len(s) >= minimum]
    if not series:
        return []
    common = min(len(s) for s in series)
    aligned = [s[-common:] for s in series]
    return [statistics.median(column) for column in zip(*aligned, strict=True)]


def regression(ranks: Sequence[RankSteps], spec: StepTimeRegression) -> tuple[Finding | None, str]:
    minimum = spec.steps + spec.baseline_steps // 2
    job = job_step_series(ranks, spec.steps + spec.baseline_steps, minimum)
    if len(job) < minimum:
        have = max((len(_normal(r, r.duration_ms)) for r in ranks), default=0)
        return None, f"stepTimeRegression: {min(have, len(job) or have)} normal steps of the job, {minimum} needed"
    window, base = job[-spec.steps :], job[: -spec.steps]
    if not base:
        return None, f"stepTimeRegression: no baseline steps before the last {spec.steps}"
    baseline = statistics.median(base)
    if not baseline > 0:  # steps of 0 ms (or a hostile series): no ratio to judge, never a division by zero
        return None, f"stepTimeRegression: the baseline's median step is {baseline:g} ms; nothing to compare with"
    recent = statistics.median(window)
    threshold = baseline * (1.0 + spec.threshold_percent / 100.0)
    above = sum(1 for v in window if v > threshold)
    if recent <= threshold or above < HOLD_FRACTION * len(window):
        return None, ""
    return (
        Finding(
            TriggerCondition.STEP_TIME_REGRESSION,
            f"the job's median step over its last {spec.steps} steps is {recent:.1f} ms, {recent / baseline:.2f}x its "
            f"baseline of {baseline:.1f} ms (the {len(base)} steps before); {above} of {spec.steps} steps above "
            f"{threshold:.1f} ms (+{spec.threshold_percent:g}%)",
        ),
        "",
    )


def evaluate(ranks: Sequence[RankSteps], conditions: TriggerConditions) -> Verdict:
    """Judge every condition the trigger has over the ranks' series."""
    results: list[tuple[Finding | None, str]] = []
    if conditions.stall is not None:
        results.append((stall(ranks, conditions.stall), ""))
    if conditions.straggler is not None:
        results.append(straggler(ranks, conditions.straggler))
    if conditions.step_time_regression is not None:
        results.append(regression(ranks, conditions.step_time_regression))
    found = {f.condition: f for f, _ in results if f is not None}
    notes = tuple(note for _, note in results if note)
    return Verdict(tuple(found[c] for c in PRIORITY if c in found), notes)
