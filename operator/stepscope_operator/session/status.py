"""Status builders over the contract's typed ProfileSessionStatus (read, written and given its conditions through
stepscope_contract.status_wire): target states, counts, the progress column and the final phase. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from stepscope_contract.ranks import format_rank_set
from stepscope_contract.session import (
    MAX_PROGRESS,
    MAX_TARGET_STATUSES,
    Phase,
    ReportSummary,
    TargetCounts,
    TargetState,
    TargetStatus,
)
from stepscope_contract.wire import CaptureState

_CAPTURE_TO_TARGET = {
    CaptureState.ARMED: TargetState.SIGNALLED,
    CaptureState.CAPTURING: TargetState.CAPTURING,
    CaptureState.WRITTEN: TargetState.UPLOADING,
    CaptureState.UPLOADING: TargetState.UPLOADING,
    CaptureState.UPLOADED: TargetState.CAPTURED,
    CaptureState.HUNG: TargetState.HUNG,
    CaptureState.FAILED: TargetState.FAILED,
    CaptureState.ABORTED: TargetState.ABORTED,
}


_TOLD_FIRST = frozenset({TargetState.FAILED, TargetState.CRASHED, TargetState.HUNG})
"""states kept first in a bounded per-target list: they carry the reasons"""


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 time as written by `iso` (None when absent or unreadable)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def target_state(capture: CaptureState) -> TargetState:
    return _CAPTURE_TO_TARGET[capture]


def count_targets(targets: Iterable[TargetStatus]) -> TargetCounts:
    counts = TargetCounts()
    for t in targets:
        counts.total += 1
        if t.state is TargetState.PENDING:
            counts.pending += 1
        elif t.state is TargetState.CAPTURED:
            counts.captured += 1
        elif t.state is TargetState.HUNG:
            counts.hung += 1
        elif t.state is TargetState.WAITING:
            counts.waiting += 1
        elif t.state is TargetState.DESYNC:
            counts.desync += 1
        elif t.state in (TargetState.FAILED, TargetState.ABORTED, TargetState.CRASHED):
            counts.failed += 1
        else:
            counts.active += 1
    return counts


def progress(counts: TargetCounts, culprit: int | None = None, role: str = "hung") -> str:
    """The Captured column: 'captured/total'; once the report named the rank a standstill waits for (`culprit`),
    that rank, its `role` and how many wait for it ('0/4, rank 2 hung, 3 waiting', '0/4, rank 2 desynced, 3
    waiting'). Within the column's MAX_PROGRESS characters: the waiting count goes first, then the culprit."""
    text = f"{counts.captured}/{counts.total}"
    if culprit is None or not (counts.hung or counts.desync or counts.waiting):
        return text
    told = f"{text}, rank {culprit} {role}"
    waiting = f"{told}, {counts.waiting} waiting" if counts.waiting else told
    return next((t for t in (waiting, told) if len(t) <= MAX_PROGRESS), text)


def bounded(targets: Sequence[TargetStatus]) -> tuple[list[TargetStatus], bool]:
    """The per-target list for status: failed ones first (they carry reasons), then by rank; at most the bound."""
    order = sorted(
        targets,
        key=lambda t: (t.state not in _TOLD_FIRST and not t.state.standstill, t.rank or 0, t.pod),
    )
    if len(order) <= MAX_TARGET_STATUSES:
        order = sorted(targets, key=lambda t: (t.rank is None, t.rank or 0, t.pod))
    kept = order[:MAX_TARGET_STATUSES]
    return list(kept), len(targets) > MAX_TARGET_STATUSES


def capture_phase(targets: Sequence[TargetStatus]) -> Phase:
    """Capturing while any target has not written its trace yet; Uploading once all left are uploading."""
    live = [t for t in targets if not t.state.terminal]
    if live and all(t.state is TargetState.UPLOADING for t in live):
        return Phase.UPLOADING
    return Phase.CAPTURING


def final_phase(targets: Sequence[TargetStatus]) -> Phase:
    """After a report: Succeeded when every target was captured, PartiallySucceeded otherwise."""
    return Phase.SUCCEEDED if all(t.state is TargetState.CAPTURED for t in targets) else Phase.PARTIALLY_SUCCEEDED


def evidence(targets: Sequence[TargetStatus]) -> list[TargetStatus]:
    """The targets the analysis reads: captured and hung ones, and, once a rank crashed, every failed or crashed one
    whose sidecar uploaded something (the stacks and Flight Recorder dumps of the ranks that stood waiting for it)."""
    usable = [t for t in targets if t.state is TargetState.CAPTURED or t.state.standstill]
    if not any(t.state is TargetState.CRASHED for t in targets):
        return usable
    failed = (TargetState.FAILED, TargetState.CRASHED)
    return usable + [t for t in targets if t.state in failed and t.artifact_uri]


def crash_cause(targets: Sequence[TargetStatus]) -> str:
    """'' when no rank crashed; else the first rank that did, named with its pod and why ('rank 1 (pod p-1)
    crashed: training container trainer terminated: OOMKilled (exit code 137, SIGKILL)'), and how many more."""
    crashed = sorted(
        (t for t in targets if t.state is TargetState.CRASHED),
        key=lambda t: (t.last_transition_time is None, t.last_transition_time or _EARLIEST, t.rank or 0, t.pod),
    )
    if not crashed:
        return ""
    first = crashed[0]
    rank = f"rank {first.rank}" if first.rank is not None else "rank ?"
    more = f" (and {len(crashed) - 1} more crashed)" if len(crashed) > 1 else ""
    return f"{rank} (pod {first.pod}) crashed: {first.message or 'its training container terminated'}{more}"


STANDSTILL_CAUSES = frozenset({"hang", "desync"})
"""status.summary.cause values of a job that stands still (stepscope_contract.report.Cause.HANG and DESYNC; the
operator does not import the report models)"""


CULPRIT = "(the report's culprit)"


@dataclass(frozen=True)
class Standstill:
    """What the report found about a job that stands still (from status.summary)."""

    culprits: frozenset[int]
    """the ranks that hold the job up (summary.hungRanks)"""
    desync: bool
    """the culprits called another collective than their peers (summary.cause desync)"""
    waiting_in: str | None = None
    """the collective the others wait in (summary.waitingIn)"""


def standstill_targets(targets: Sequence[TargetStatus], found: Standstill, now: datetime) -> list[TargetStatus]:
    """The targets once the report named a standstill's culprits: a hung culprit becomes Hung (or Desync), every
    other hung target Waiting, with what it waits in and for whom; the others as they were."""
    whom = format_rank_set(sorted(found.culprits))
    out = []
    for t in targets:
        if t.state is not TargetState.HUNG or t.rank is None or not found.culprits:
            out.append(t)
            continue
        if t.rank in found.culprits:
            state = TargetState.DESYNC if found.desync else TargetState.HUNG
            role = "called another collective than its peers" if found.desync else "holds the job up"
            told = CULPRIT in t.message  # told once already (a report handed back twice)
            message = t.message if told else f"{role} {CULPRIT}: {t.message or 'no step boundary'}"
        else:
            state = TargetState.WAITING
            inside = f" in {found.waiting_in}" if found.waiting_in else " in a collective"
            message = f"waits for rank{'s' if len(found.culprits) > 1 else ''} {whom}{inside} (no fault of its own)"
        out.append(t.model_copy(update={"state": state, "message": message[:1024], "last_transition_time": now}))
    return out


def failure_summary(targets: Sequence[TargetStatus], limit: int = 5) -> str:
    """The targets not captured, each reason once: targets with the same state and message share one entry
    ("pod-a, pod-b (ranks 0, 1): Hung: no step boundary within stepTimeoutSeconds (30 s)"); a standstill's culprits
    (Hung, Desync) first, then the targets waiting for them, then the others."""
    first = {TargetState.HUNG: 0, TargetState.DESYNC: 0, TargetState.WAITING: 1}
    bad = sorted((t for t in targets if t.state is not TargetState.CAPTURED), key=lambda t: first.get(t.state, 2))
    groups: dict[tuple[str, str], list[TargetStatus]] = {}
    for t in bad:
        groups.setdefault((t.state.value, t.message or "no detail"), []).append(t)
    parts = []
    for (state, message), members in list(groups.items())[:limit]:
        pods = ", ".join(t.pod for t in members[:4]) + (f" and {len(members) - 4} more" if len(members) > 4 else "")
        ranks = [t.rank for t in members if t.rank is not None]
        which = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_rank_set(ranks)}" if ranks else "rank ?"
        parts.append(f"{pods} ({which}): {state}: {message}")
    if len(groups) > limit:
        parts.append(f"and {len(groups) - limit} more reasons")
    return "; ".join(parts)


def with_gate(verdict: str, summary: ReportSummary | None, reason: str) -> str:
    """The status message of a gated session as one sentence: the analysis' verdict, then the gate's result and the
    figure that decided it ("...; gate: Regressed, +21.6% added work."), or the reason there was no decision."""
    result = summary.gate_result if summary is not None and summary.gate_result else reason
    figure = summary.gate_figure if summary is not None and summary.gate_figure else None
    told = f"{result}, {figure}" if figure else (result if result == reason else f"{result} ({reason})")
    return f"{verdict.rstrip(' .;')}; gate: {told}."


def finished_message(phase: Phase, report_url: str | None, artifacts_uri: str | None, reason: str = "") -> str:
    """The Finished condition's message: the outcome in its own words (analysed or not, where the report or the
    traces are; a failure's reason), never the verdict or a failure's why, which the session's message tells once."""
    if phase is Phase.FAILED:
        return f"no report ({reason})" if reason else "no report"
    partly = " what was captured" if phase is Phase.PARTIALLY_SUCCEEDED else ""
    if report_url:
        return f"analysed{partly}; report: {report_url}"
    if artifacts_uri:
        return f"not analysed; traces: {artifacts_uri}"
    return f"analysed{partly}"
