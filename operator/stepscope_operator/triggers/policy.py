"""When a ProfileTrigger fires, as pure functions of its spec, its last status, the conditions judged now and the
sessions it owns.

- An *episode* is a run of evaluations in which a condition of one kind holds: a slowdown (straggler or regression;
  the same slowdown often shows as both) or a stall. An episode fires at most once: a slowdown that lasts for hours is
  profiled once, not every cooldown. A new episode (the condition cleared, then came back; or a stall after a
  slowdown) may fire again. A straggler or regression fires only once its episode has lasted its `forSeconds` (a
  Prometheus alert's `for`): on a shared machine, seconds of a neighbour's load slow every step, and must not fire.
- A condition fires only when nothing blocks it: `suspend`, a session of this trigger still running (one active
  session per target), the daily cap (`maxSessionsPerDay` in any 24 hours) and `cooldownSeconds` since the last
  firing. An episode blocked at first fires once the block lifts, if it still holds.
- The cron `schedule` fires at each due time whatever the conditions, honouring suspend, the active session and the
  daily cap but not the cooldown; a due time that cannot fire is skipped, not queued (a CronJob's `Forbid`).
- History: finished sessions beyond `successfulSessionsHistoryLimit` / `failedSessionsHistoryLimit` are deleted,
  oldest first, like a CronJob's Jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from stepscope_contract.session import Phase
from stepscope_contract.trigger import (
    MAX_FIRED_SESSIONS,
    FiredSession,
    ProfileTriggerSpec,
    ProfileTriggerStatus,
    TriggerCondition,
    TriggerStatusCondition,
    TriggerStatusConditionType,
)
from stepscope_operator.session.status import iso
from stepscope_operator.triggers import cron
from stepscope_operator.triggers.conditions import Finding, Verdict

DAY = timedelta(days=1)
SUCCESSFUL = frozenset({Phase.SUCCEEDED.value, Phase.PARTIALLY_SUCCEEDED.value})
FAILED = frozenset({Phase.FAILED.value})
TERMINAL = SUCCESSFUL | FAILED


@dataclass(frozen=True)
class Owned:
    """A session this trigger created, as listed now."""

    name: str
    created: str  # creationTimestamp (RFC 3339 sorts as time)
    phase: str | None

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL


@dataclass(frozen=True)
class Decision:
    fire: Finding | None = None  # what to create a session for (a Schedule finding for a due schedule)
    condition: TriggerCondition = TriggerCondition.NONE
    condition_since: datetime | None = None
    episode_fired: bool = False
    last_schedule_time: datetime | None = None
    message: str = ""  # what holds and why it fired or did not
    blocked: str = ""  # why the finding did not fire ('' when it fired or nothing holds)
    events: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)  # (type, reason, message)


def episode_kind(condition: TriggerCondition | None) -> str:
    if condition is TriggerCondition.STALL:
        return "stall"
    if condition in (TriggerCondition.STRAGGLER, TriggerCondition.STEP_TIME_REGRESSION):
        return "slowdown"
    return ""


def active_session(owned: Sequence[Owned]) -> Owned | None:
    """The newest session of this trigger that has not finished (a new one has no phase yet)."""
    running = [s for s in owned if not s.terminal]
    return max(running, key=lambda s: (s.created, s.name)) if running else None


def fired_today(status: ProfileTriggerStatus, now: datetime) -> int:
    return sum(1 for s in status.sessions if now - s.created_at < DAY)


def blocked(
    spec: ProfileTriggerSpec,
    status: ProfileTriggerStatus,
    active: Owned | None,
    now: datetime,
    cooldown: bool = True,
) -> str:
    """Why a session cannot be created now ('' when it can)."""
    if spec.suspend:
        return "the trigger is suspended (spec.suspend)"
    if active is not None:
        return f"session {active.name} is still running (one active session at a time)"
    if fired_today(status, now) >= spec.max_sessions_per_day:
        return f"{spec.max_sessions_per_day} sessions in the last 24 hours (maxSessionsPerDay)"
    if cooldown and status.last_fired_time is not None:
        until = status.last_fired_time + timedelta(seconds=spec.cooldown_seconds)
        if now < until:
            return f"cooling down until {iso(until)} (cooldownSeconds {spec.cooldown_seconds})"
    return ""


def schedule_due(
    spec: ProfileTriggerSpec, status: ProfileTriggerStatus, created: datetime, now: datetime
) -> datetime | None:
    if spec.schedule is None:
        return None
    since = status.last_schedule_time or created
    return cron.latest_due(cron.parse(spec.schedule), since, now)


def _episode(status: ProfileTriggerStatus, finding: Finding | None, now: datetime) -> tuple[datetime | None, bool]:
    """(since, fired) of the episode `finding` belongs to."""
    if finding is None:
        return None, False
    if episode_kind(finding.condition) != episode_kind(status.condition) or status.condition_since is None:
        return now, False
    return status.condition_since, status.episode_fired


def _last_session(status: ProfileTriggerStatus) -> str:
    return status.sessions[0].name if status.sessions else "an earlier session"


def _judge_finding(
    spec: ProfileTriggerSpec, status: ProfileTriggerStatus, finding: Finding, active: Owned | None, now: datetime
) -> Decision:
    since, fired = _episode(status, finding, now)
    base = Decision(condition=finding.condition, condition_since=since, episode_fired=fired)
    holds = f"{finding.condition.value}: {finding.message}"
    if since is not None and not fired:
        hold = spec.conditions.for_seconds(finding.condition)
        if now < since + timedelta(seconds=hold):
            waiting = f"holds since {iso(since)}; fires once it has held for {hold} s (forSeconds)"
            return replace(base, message=f"{holds}; {waiting}")
    if fired:
        assert since is not None
        return replace(
            base, message=f"{holds}; this episode (since {iso(since)}) was profiled by {_last_session(status)}"
        )
    why = blocked(spec, status, active, now)
    if why:
        events: tuple[tuple[str, str, str], ...] = ()
        if since == now or why != status_blocked(status):
            events = (("Normal", "Suppressed", f"{holds}; not fired: {why}"),)
        return replace(base, message=f"{holds}; not fired: {why}", blocked=why, events=events)
    return replace(base, fire=finding, episode_fired=True, message=holds)


def status_blocked(status: ProfileTriggerStatus) -> str:
    """The block the previous evaluation reported, from its message."""
    _, sep, why = status.message.rpartition("; not fired: ")
    return why if sep else ""


def decide(
    spec: ProfileTriggerSpec,
    status: ProfileTriggerStatus,
    verdict: Verdict,
    owned: Sequence[Owned],
    *,
    created: datetime,
    now: datetime,
) -> Decision:
    """What to do at this evaluation."""
    active = active_session(owned)
    finding = verdict.first
    if finding is not None:
        decision = _judge_finding(spec, status, finding, active, now)
    else:
        quiet = "no condition holds" + (f" ({'; '.join(verdict.notes)})" if verdict.notes else "")
        decision = Decision(message=quiet)
    due = schedule_due(spec, status, created, now)
    if due is None:
        return replace(decision, last_schedule_time=status.last_schedule_time)
    decision = replace(decision, last_schedule_time=due)
    if decision.fire is not None:
        return decision  # the condition's session serves the schedule too
    why = blocked(spec, status, active, now, cooldown=False)
    scheduled = Finding(TriggerCondition.SCHEDULE, f"scheduled run of {iso(due)} ({spec.schedule})")
    if why:
        skipped = f"scheduled run of {iso(due)} skipped: {why}"
        return replace(
            decision,
            message=f"{decision.message}; {skipped}",
            events=(*decision.events, ("Normal", "Suppressed", skipped)),
        )
    return replace(decision, fire=scheduled, message=f"{decision.message}; {scheduled.message}")


def record_fire(status: ProfileTriggerStatus, name: str, finding: Finding, now: datetime) -> ProfileTriggerStatus:
    """The status once session `name` was created for `finding`."""
    entry = FiredSession(name=name, created_at=now, condition=finding.condition, reason=finding.message[:1024])
    return status.model_copy(
        update={
            "last_fired_time": now,
            "last_fired_condition": finding.condition,
            "last_fired_reason": finding.message[:1024],
            "session_count": status.session_count + 1,
            "sessions": [entry, *[s for s in status.sessions if s.name != name]][:MAX_FIRED_SESSIONS],
            "active_session": name,
        }
    )


def refresh_sessions(status: ProfileTriggerStatus, owned: Sequence[Owned]) -> ProfileTriggerStatus:
    """The remembered sessions with their phases now ('Deleted' once gone) and the active one."""
    phases = {s.name: s.phase for s in owned}
    sessions = [
        s.model_copy(update={"phase": phases.get(s.name) if s.name in phases else "Deleted"}) for s in status.sessions
    ]
    active = active_session(owned)
    return status.model_copy(update={"sessions": sessions, "active_session": active.name if active else None})


def to_prune(spec: ProfileTriggerSpec, owned: Sequence[Owned]) -> list[str]:
    """Finished sessions beyond the history limits, oldest first."""
    newest_first = sorted(owned, key=lambda s: (s.created, s.name), reverse=True)
    out: list[str] = []
    for phases, limit in (
        (SUCCESSFUL, spec.successful_sessions_history_limit),
        (FAILED, spec.failed_sessions_history_limit),
    ):
        done = [s.name for s in newest_first if s.phase in phases]
        out.extend(reversed(done[limit:]))
    return out


def set_condition(
    conditions: Sequence[TriggerStatusCondition],
    type_: TriggerStatusConditionType,
    value: bool,
    *,
    reason: str,
    message: str,
    now: datetime,
    generation: int,
) -> list[TriggerStatusCondition]:
    """`conditions` with `type_` set; its lastTransitionTime changes only when its status does."""
    status = "True" if value else "False"
    old = next((c for c in conditions if c.type is type_), None)
    since = old.last_transition_time if old is not None and old.status == status else now
    new = TriggerStatusCondition(
        type=type_,
        status=status,
        reason=reason,
        message=message[:4000],
        last_transition_time=since,
        observed_generation=generation,
    )
    return [c for c in conditions if c.type is not type_] + [new]
