"""diff_reports: two contract Reports -> a contract DiffResult (verdict, regression and its interval, added work,
top changes, phases, per-rank step times). Pure: no I/O, so the CLI and the analyzer Job call the same function.

The verdict's rule is verdict.py's. By default the steps' interval is that of the steps at equal op speed: the
candidate's steps with their work (op_share: the ranks' mean share of the step outside input and collective
waits) run at the baseline's op speed, by the per-call shift of the ops the candidate did not change (op_speed.py),
the two intervals' half-widths added in quadrature, so two recordings of the same code on a machine whose speed
moved between them compare equal; what the steps spend waiting for their input or a peer does not follow the
machine's speed and is left as measured. `wall_clock=True`, too few unchanged ops, or GPU ranks (whose unchanged
kernels' per-call change is the code's or the device's, reported in a note) use the measured steps. Beside it, the
added work (added_work.py): the self time of what the candidate added against the rest of its own step, which the
machine's speed cannot explain away.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime

from stepscope_analyzer import tool_version
from stepscope_analyzer.diff.added_work import added_work
from stepscope_analyzer.diff.name_deltas import COMMUNICATION, NameTimes, Scales, name_changes, name_times, one_rank
from stepscope_analyzer.diff.op_speed import OpSpeed, unchanged_op_speed
from stepscope_analyzer.diff.phase_deltas import mean_phases, phase_deltas
from stepscope_analyzer.diff.shift_interval import Shift, hodges_lehmann
from stepscope_analyzer.diff.step_samples import (
    MAX_STEP_US,
    MIN_STEP_US,
    analysed_ranks,
    job_steps,
    median_and_p90,
)
from stepscope_analyzer.diff.verdict import decide, pct
from stepscope_contract.diff import DiffResult, DiffVerdict, RankDelta, SideSummary, TopChange
from stepscope_contract.report import RankReport, Report

SPEED_NOTE_PCT = 5.0
"""the unchanged ops' per-call change, in %, from which a note points at it"""
METHOD = (
    "Hodges-Lehmann shift of log step time (median of every candidate/baseline ratio of job steps; a job step is "
    "the median over the ranks of their k-th step), distribution-free Moses interval"
)
AT_EQUAL_SPEED = (
    "; at equal op speed: the candidate's work (its ranks' mean share of the step outside input and collective "
    "waits) divided by the weighted median of the unchanged ops' per-call ratios (interval of a weighted median), the "
    "half-widths added in quadrature"
)


@dataclass(frozen=True)
class DiffConfig:
    max_regression_pct: float = 10.0
    confidence: float = 0.90
    top_changes: int = 50
    wall_clock: bool = False
    """decide on the measured step times, not at equal op speed"""

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if not (math.isfinite(self.max_regression_pct) and self.max_regression_pct >= 0.0):
            raise ValueError(f"max_regression_pct must be >= 0, got {self.max_regression_pct}")


_pct = pct
WAIT_NOTE_US = 100.0
"""waiting in collectives that grew by this much per step gets a note naming what caused it"""


def side_summary(report: Report, source: str, steps: int) -> SideSummary:
    median, p90 = median_and_p90(report)
    return SideSummary(
        source=source,
        session=report.session,
        generated_at=report.generated_at,
        world_size=report.world_size,
        ranks=len(report.ranks),
        ranks_analysed=len(analysed_ranks(report)),
        steps=steps,
        median_step_us=median,
        p90_step_us=p90,
    )


def rank_deltas(baseline: Report, candidate: Report) -> list[RankDelta]:
    b = {r.rank: r for r in baseline.ranks}
    c = {r.rank: r for r in candidate.ranks}
    out = []
    for rank in sorted(b.keys() | c.keys()):
        br, cr = b.get(rank), c.get(rank)
        b_med = _median(br)
        c_med = _median(cr)
        phases = phase_deltas(mean_phases([br] if br else []), mean_phases([cr] if cr else []))
        out.append(
            RankDelta(
                rank=rank,
                baseline_status=br.status.value if br else "absent",
                candidate_status=cr.status.value if cr else "absent",
                baseline_median_us=b_med,
                candidate_median_us=c_med,
                delta_pct=100.0 * (c_med / b_med - 1.0) if b_med and c_med else None,
                phases=phases,
            )
        )
    return out


def _median(rank: RankReport | None) -> float | None:
    if rank is None or rank.steps.count == 0 or not MIN_STEP_US <= rank.steps.median_us <= MAX_STEP_US:
        return None
    return rank.steps.median_us


def _notes(baseline: Report, candidate: Report, has_phases: bool) -> list[str]:
    notes = []
    if baseline.world_size != candidate.world_size:
        notes.append(
            f"world sizes differ (baseline {baseline.world_size}, candidate {candidate.world_size}): "
            "the step times are compared, per-rank rows only where both sides hold the rank"
        )
    if not has_phases:
        missing = [n for n, r in (("baseline", baseline), ("candidate", candidate)) if mean_phases(r.ranks) is None]
        notes.append(f"no step phases in the {' and '.join(missing)} report: phases are not compared")
    for name, report in (("baseline", baseline), ("candidate", candidate)):
        if report.errors:
            notes.append(f"the {name} has {len(report.errors)} rank error(s); those ranks are left out")
    return notes


def _speed_note(speed: OpSpeed | None, step_pct: float | None, adjusted: bool) -> list[str]:
    """A note when the unchanged ops moved together by as much as the gate cares about (op_speed.py)."""
    if speed is None or abs(speed.pct) < SPEED_NOTE_PCT:
        return []
    way = f"{speed.pct:.1f}% slower" if speed.pct > 0 else f"{-speed.pct:.1f}% faster"
    step = f" (measured steps: {step_pct:+.1f}%)" if step_pct is not None and not adjusted else ""
    what = "kernels" if speed.kernels else "ops"
    head = f"the {speed.ops} {what} with the same calls on both sides ran {way} per call in the candidate{step}"
    if speed.kernels:
        return [
            f"{head}: on GPU ranks the measured steps decide; a kernel's time per call changes with the code (a "
            "library's kernels, larger inputs, another dtype) or the device (its clocks: see the report's GPU metrics)"
        ]
    if adjusted:
        return [
            f"{head}: the steps are compared at equal op speed, taking that for the machine's speed between the "
            "recordings; a change that slows every op alike (larger inputs, thread settings) reads the same way "
            "(--wall-clock, or spec.gate.wallClock, decides on the measured steps)"
        ]
    return [
        f"{head}: the machine's speed differed between the recordings, or a change touched every op alike; "
        "compare the top changes (new or more calls are the code's)"
    ]


def _at_speed(log_shift: float, log_speed: float, share: float) -> float:
    """The candidate's step (log ratio to the baseline's) with its work run at the baseline's op speed: only the
    work's `share` of the step is divided by the speed ratio, the rest (waits for input or peers) is kept."""
    return log_shift + math.log(max(1.0 - share + share * math.exp(-log_speed), 1e-12))


def at_equal_speed(shift: Shift, speed: OpSpeed, share: float = 1.0) -> Shift:
    """The steps' shift less what the ops' per-call shift explains of it: the candidate's work (`share` of its
    step, op_share) at the baseline's op speed; each end widened by both intervals' half-widths in quadrature (the
    speed's carried through the same adjustment)."""
    estimate = _at_speed(shift.estimate, speed.log_ratio, share)
    low = high = None
    if shift.low is not None:
        low = estimate - math.hypot(
            shift.estimate - shift.low, estimate - _at_speed(shift.estimate, speed.log_high, share)
        )
    if shift.high is not None:
        high = estimate + math.hypot(
            shift.high - shift.estimate, _at_speed(shift.estimate, speed.log_low, share) - estimate
        )
    return Shift(estimate=estimate, low=low, high=high, pairs=shift.pairs)


def op_share(phases: dict[str, float] | None) -> float:
    """The share of a step that a machine's speed stretches, from the ranks' mean phases (phase_deltas.mean_phases):
    the step's work (forward, backward, optimizer and other host work, ops and Python alike) over the step, leaving
    out what it waits in (data_loading: the input pipeline, a sleep; communication_wait: a peer); 1 without phases."""
    total = sum(phases.values()) if phases else 0.0
    if phases is None or total <= 0:
        return 1.0
    return min(max((total - phases["data_loading"] - phases["communication_wait"]) / total, 0.0), 1.0)


def _scales(b: NameTimes, c: NameTimes, speed: OpSpeed | None) -> Scales:
    """The machine's speed the changes are ranked at: none when the gate does not compare at equal op speed."""
    if speed is None:
        return Scales()
    ranks, highs = {}, {}
    for r in b.ranks.keys() & c.ranks.keys():
        own = unchanged_op_speed(one_rank(b, r), one_rank(c, r))
        if own is not None:
            ranks[r], highs[r] = math.exp(own.log_ratio), math.exp(own.log_high)
    return Scales(math.exp(speed.log_ratio), ranks, math.exp(speed.log_high), highs)


def _where(change: TopChange) -> str:
    return f" on rank {change.rank}" if change.rank is not None else ""


def _lead(changes: list[TopChange], verdict: DiffVerdict, adjusted: bool) -> str:
    """The change that moved the step most in the verdict's direction, for the reason line, with the figure the
    changes are ranked by (and shown with)."""
    if verdict is DiffVerdict.UNUSABLE or not changes:
        return ""
    faster = verdict is DiffVerdict.IMPROVED

    def key(t: TopChange) -> float:
        return t.at_equal_op_speed_delta_us_per_step

    top = min(changes, key=key) if faster else max(changes, key=key)
    if (key(top) < 0) != faster:
        return ""
    figure = f"{key(top) / 1000:+.2f} ms/step" + (" at equal op speed" if adjusted else "")
    return f"; top change: {top.name} {figure} ({top.change.value}{_where(top)})"


def _noise_us(noise_pct: float | None, baseline_log_us: list[float]) -> float | None:
    """The steps' noise in µs per step: its share of the baseline's median job step."""
    if noise_pct is None or not baseline_log_us:
        return None
    return noise_pct / 100.0 * math.exp(statistics.median(baseline_log_us))


def within_noise(changes: list[TopChange], noise_us: float | None, verdict: DiffVerdict) -> list[TopChange]:
    """The changes a pass (or an improvement) leaves unlisted: smaller, at equal op speed, than the steps' noise
    (verdict.py: half the width of the interval the gate decided on), which the gate could not tell from noise
    either. A regression lists every change: they are what it is made of."""
    if noise_us is None or verdict not in (DiffVerdict.PASSED, DiffVerdict.IMPROVED):
        return []
    return [c for c in changes if abs(c.at_equal_op_speed_delta_us_per_step) < noise_us]


def _noise_note(quiet: int, noise_us: float | None, level: str) -> list[str]:
    if not quiet or noise_us is None:
        return []
    return [
        f"{quiet} smaller change(s) are not listed: each within the steps' noise, {noise_us / 1000:.2f} ms per step "
        f"(half the width of the steps' {level} interval), as the gate itself cannot tell them from noise"
    ]


def _wait_note(changes: list[TopChange]) -> list[str]:
    """Waiting that grew, as the consequence of the largest change that is not communication."""
    waits = [c for c in changes if c.kind == COMMUNICATION and c.wait_delta_us_per_step >= WAIT_NOTE_US]
    cause = next((c for c in changes if c.kind != COMMUNICATION and c.at_equal_op_speed_delta_us_per_step > 0), None)
    if not waits:
        return []
    w = max(waits, key=lambda c: c.wait_delta_us_per_step)
    head = f"waiting in {w.name}{_where(w)} grew by {w.wait_delta_us_per_step / 1000:.2f} ms/step"
    if cause is None:
        return [f"{head}: other ranks arrive later at it (see the per-rank table)"]
    return [
        f"{head}: the ranks wait for the one that is late, a consequence of {cause.name}{_where(cause)} "
        f"({cause.delta_us_per_step / 1000:+.2f} ms/step), not a change of its own"
    ]


def diff_reports(
    baseline: Report,
    candidate: Report,
    config: DiffConfig | None = None,
    *,
    baseline_source: str = "",
    candidate_source: str = "",
    generated_at: datetime | None = None,
) -> DiffResult:
    cfg = config or DiffConfig()
    b_steps, c_steps = job_steps(baseline), job_steps(candidate)
    counts = (len(b_steps.log_us), len(c_steps.log_us))
    measured = hodges_lehmann(b_steps.log_us, c_steps.log_us, cfg.confidence) if min(counts) > 0 else None
    b_names, c_names = name_times(baseline), name_times(candidate)
    b_phases, c_phases = mean_phases(analysed_ranks(baseline)), mean_phases(analysed_ranks(candidate))
    speed = unchanged_op_speed(b_names, c_names, cfg.confidence)
    shift = measured
    if measured is not None and speed is not None and not cfg.wall_clock and not speed.kernels:
        shift = at_equal_speed(measured, speed, op_share(c_phases))
    adjusted = shift is not measured
    used_speed = speed if adjusted else None
    added = added_work(b_names, c_names, c_steps.log_us, cfg.confidence)
    decision = decide(
        shift,
        counts,
        added,
        cfg.max_regression_pct,
        cfg.confidence,
        adjusted=adjusted,
        measured_pct=_pct(measured.estimate) if measured else None,
    )
    verdict = decision.verdict
    told = {name: added.rank for name in added.names} if added is not None and added.rank is not None else {}
    changes = name_changes(
        b_names, c_names, _scales(b_names, c_names, used_speed), faster=verdict is DiffVerdict.IMPROVED, told=told
    )
    noise_us = _noise_us(decision.noise_pct, b_steps.log_us)
    quiet = within_noise(changes, noise_us, verdict)
    unlisted = {id(c) for c in quiet}
    changes = [c for c in changes if id(c) not in unlisted]
    reason = decision.reason + _lead(changes, verdict, adjusted)
    phases = phase_deltas(b_phases, c_phases)
    return DiffResult(
        tool_version=tool_version(),
        generated_at=generated_at or datetime.now(UTC),
        verdict=verdict,
        reason=reason,
        max_regression_pct=cfg.max_regression_pct,
        confidence=cfg.confidence,
        regression_pct=_pct(shift.estimate) if shift else None,
        regression_ci_low_pct=_pct(shift.low) if shift else None,
        regression_ci_high_pct=_pct(shift.high) if shift else None,
        at_equal_op_speed=adjusted,
        step_regression_pct=_pct(measured.estimate) if measured else None,
        step_regression_ci_low_pct=_pct(measured.low) if measured else None,
        step_regression_ci_high_pct=_pct(measured.high) if measured else None,
        added_work=added,
        decided_by=decision.decided_by,
        method=METHOD + (AT_EQUAL_SPEED if adjusted else ""),
        baseline=side_summary(baseline, baseline_source, counts[0]),
        candidate=side_summary(candidate, candidate_source, counts[1]),
        top_changes=changes[: cfg.top_changes],
        changes_total=len(changes),
        phases=phases,
        ranks=rank_deltas(baseline, candidate),
        unchanged_ops_speed_pct=round(speed.pct, 2) if speed else None,
        unchanged_ops_speed_ci_low_pct=round(speed.low_pct, 2) if speed else None,
        unchanged_ops_speed_ci_high_pct=round(speed.high_pct, 2) if speed else None,
        unchanged_ops=speed.ops if speed else 0,
        notes=_notes(baseline, candidate, bool(phases))
        + _speed_note(speed, _pct(measured.estimate) if measured else None, adjusted)
        + _wait_note(changes)
        + _noise_note(len(quiet), noise_us, f"{cfg.confidence:.0%}"),
    )
