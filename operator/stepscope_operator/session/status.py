"""Status builders over the contract's typed ProfileSessionStatus (read, written and given its conditions through
stepscope_contract.status_wire): target states, counts, the progress column and the final phase. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from stepscope_contract.ranks import format_rank_set
from stepscope_contract.session import (
    MAX_PROGRESS,
    MAX_TARGET_STATUSES,
    Phase,
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
        elif t.state in (TargetState.FAILED, TargetState.ABORTED):
            counts.failed += 1
        else:
            counts.active += 1
    return counts


def progress(counts: TargetCounts, culprit: int | None = None, role: str = "hung") -> str:
    """The Captured column: 'captured/total'; once the report named the rank a standstill waits for (`culprit`),
    that rank and its `role` ('0/4, rank 2 hung', '0/4, rank 2 desynced'): the other hung targets wait for it, as
    the message says. Within the column's MAX_PROGRESS characters."""
    text = f"{counts.captured}/{counts.total}"
    if culprit is None or not counts.hung:
        return text
    told = f"{text}, rank {culprit} {role}"
    return told if len(told) <= MAX_PROGRESS else text


def bounded(targets: Sequence[TargetStatus]) -> tuple[list[TargetStatus], bool]:
    """The per-target list for status: failed ones first (they carry reasons), then by rank; at most the bound."""
    order = sorted(
        targets,
        key=lambda t: (t.state is not TargetState.FAILED and t.state is not TargetState.HUNG, t.rank or 0, t.pod),
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


STANDSTILL_CAUSES = frozenset({"hang", "desync"})
"""status.summary.cause values of a job that stands still (stepscope_contract.report.Cause.HANG and DESYNC; the
operator does not import the report models)"""


def failure_summary(targets: Sequence[TargetStatus], limit: int = 5, culprit: int | None = None) -> str:
    """The targets not captured, each reason once: targets with the same state and message share one entry
    ("pod-a, pod-b (ranks 0, 1): Hung: no step boundary within stepTimeoutSeconds (30 s)"). `culprit`: the rank the
    report found holding a standstill up (hang or desync); the other hung ranks are told as waiting for it."""
    bad = sorted((t for t in targets if t.state is not TargetState.CAPTURED), key=lambda t: t.rank != culprit)
    groups: dict[tuple[str, str], list[TargetStatus]] = {}
    for t in bad:
        groups.setdefault(_standstill_role(t, culprit) or (t.state.value, t.message or "no detail"), []).append(t)
    parts = []
    for (state, message), members in list(groups.items())[:limit]:
        pods = ", ".join(t.pod for t in members[:4]) + (f" and {len(members) - 4} more" if len(members) > 4 else "")
        ranks = [t.rank for t in members if t.rank is not None]
        which = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_rank_set(ranks)}" if ranks else "rank ?"
        parts.append(f"{pods} ({which}): {state}: {message}")
    if len(groups) > limit:
        parts.append(f"and {len(groups) - limit} more reasons")
    return "; ".join(parts)


def _standstill_role(t: TargetStatus, culprit: int | None) -> tuple[str, str] | None:
    """(state, message) of a hung target once the report named the rank the others wait for."""
    if culprit is None or t.state is not TargetState.HUNG or t.rank is None:
        return None
    if t.rank == culprit:
        return "Hung", f"holds the job up (the report's culprit): {t.message or 'no step boundary'}"
    return "Waiting", f"waits for rank {culprit} in a collective (no fault of its own)"
