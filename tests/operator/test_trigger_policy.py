"""When a trigger fires, as pure functions: once per episode, not while its session runs, not in its cooldown, not
beyond the daily cap, not when suspended; an episode blocked at first fires once the block lifts; a stall after a
slowdown is a new episode; the schedule fires without the cooldown and a blocked due time is skipped; history limits
prune the oldest finished sessions; the session a firing creates is owned, labelled and annotated."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from stepscope_contract.constants import TRIGGER_LABEL
from stepscope_contract.session import ProfileSessionSpec
from stepscope_contract.trigger import ProfileTriggerSpec, ProfileTriggerStatus, TriggerCondition
from stepscope_operator.triggers.conditions import Finding, Verdict
from stepscope_operator.triggers.policy import Decision, Owned, decide, record_fire, refresh_sessions, to_prune
from stepscope_operator.triggers.sessions import build_session, session_name, trigger_label

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STRAGGLER = Finding(TriggerCondition.STRAGGLER, "rank 2's own time ... is 2.40x ...", (2,))
REGRESSION = Finding(TriggerCondition.STEP_TIME_REGRESSION, "the job's median step ...")
STALL = Finding(TriggerCondition.STALL, "no step on ranks 0-3 for 130 s (stall.seconds 120)", (0, 1, 2, 3))


def spec(**extra: object) -> ProfileTriggerSpec:
    return ProfileTriggerSpec.model_validate(
        {
            "targets": {"jobRef": {"kind": "Job", "name": "train"}},
            "conditions": {
                "straggler": {"forSeconds": 0},
                "stall": {"seconds": 120},
                "stepTimeRegression": {"forSeconds": 0},
            },
            "sessionTemplate": {"spec": {"storage": {"uri": "s3://bucket/p"}, "capture": {"stepTimeoutSeconds": 600}}},
            "cooldownSeconds": 600,
            "maxSessionsPerDay": 3,
            **extra,
        }
    )


class Run:
    """A trigger evaluated step by step: the status carries over as the operator's would."""

    def __init__(self, s: ProfileTriggerSpec | None = None) -> None:
        self.spec = s or spec()
        self.status = ProfileTriggerStatus()
        self.owned: list[Owned] = []

    def at(self, minutes: float, *findings: Finding) -> Decision:
        now = T0 + timedelta(minutes=minutes)
        decision = decide(self.spec, self.status, Verdict(findings), self.owned, created=T0, now=now)
        self.status = self.status.model_copy(
            update={
                "condition": decision.condition,
                "condition_since": decision.condition_since,
                "episode_fired": decision.episode_fired,
                "last_schedule_time": decision.last_schedule_time,
                "message": decision.message,
            }
        )
        if decision.fire is not None:
            name = f"t-{self.status.session_count + 1}"
            self.status = record_fire(self.status, name, decision.fire, now)
            self.owned.append(Owned(name, now.isoformat(), None))
        return decision

    def finish_all(self, phase: str = "Succeeded") -> None:
        self.owned = [Owned(s.name, s.created, phase if s.phase is None else s.phase) for s in self.owned]
        self.status = refresh_sessions(self.status, self.owned)


def test_a_slowdown_fires_once_however_long_it_lasts() -> None:
    run = Run()
    assert run.at(0).fire is None
    first = run.at(1, STRAGGLER, REGRESSION)
    assert first.fire == STRAGGLER and first.episode_fired
    run.finish_all()
    for minute in range(2, 120, 5):  # hours of the same slowdown, long past the cooldown
        later = run.at(minute, REGRESSION)  # the same episode, even as another condition of its kind
        assert later.fire is None and "was profiled by t-1" in later.message
    assert run.status.session_count == 1


def test_a_slowdown_must_last_its_for_seconds() -> None:
    run = Run(spec(conditions={"straggler": {"forSeconds": 90}, "stall": {"seconds": 60}}))
    assert run.at(0, STRAGGLER).fire is None  # holds, since 12:00
    run.at(1)  # a burst of contention that passed: the episode ends
    waiting = run.at(2, STRAGGLER)  # holds again, since 12:02
    assert waiting.fire is None and waiting.events == ()
    assert waiting.message.endswith("holds since 2026-03-01T12:02:00Z; fires once it has held for 90 s (forSeconds)")
    assert run.at(3, STRAGGLER).fire is None
    assert run.at(3.5, STRAGGLER).fire == STRAGGLER  # 90 s of it
    run.finish_all()
    assert run.at(40, STALL).fire == STALL  # a stall's seconds are its own persistence: at once


def test_a_new_episode_fires_again_after_the_cooldown() -> None:
    run = Run()
    run.at(0, STRAGGLER)
    run.finish_all()
    run.at(3)  # cleared
    blocked = run.at(4, STRAGGLER)  # back, but within the 10-minute cooldown
    assert blocked.fire is None and blocked.blocked.startswith("cooling down until 2026-03-01T12:10:00Z")
    assert [e[1] for e in blocked.events] == ["Suppressed"]
    assert run.at(6, STRAGGLER).events == ()  # the same block is not reported twice
    assert run.at(11, STRAGGLER).fire == STRAGGLER  # the cooldown is over and the episode was never profiled


def test_one_session_at_a_time() -> None:
    run = Run(spec(cooldownSeconds=0))
    run.at(0, STRAGGLER)  # t-1 runs
    run.at(1)
    stall = run.at(2, STALL)  # a new episode, but t-1 is still running
    assert stall.fire is None and stall.blocked == "session t-1 is still running (one active session at a time)"
    run.finish_all()
    assert run.at(3, STALL).fire == STALL


def test_a_stall_after_a_slowdown_is_a_new_episode() -> None:
    run = Run(spec(cooldownSeconds=0))
    run.at(0, STRAGGLER)
    run.finish_all()
    assert run.at(1, STALL, STRAGGLER).fire == STALL


def test_the_daily_cap_counts_the_last_24_hours() -> None:
    run = Run(spec(cooldownSeconds=0, maxSessionsPerDay=2))
    for minute in (0, 10):
        run.at(minute, STRAGGLER)
        run.finish_all()
        run.at(minute + 1)
    capped = run.at(20, STRAGGLER)
    assert capped.fire is None and capped.blocked == "2 sessions in the last 24 hours (maxSessionsPerDay)"
    assert run.at(24 * 60 + 1, STRAGGLER).fire == STRAGGLER


def test_suspended_triggers_report_but_do_not_fire() -> None:
    run = Run(spec(suspend=True))
    decision = run.at(0, STALL)
    assert decision.fire is None and decision.condition is TriggerCondition.STALL
    assert decision.message.endswith("not fired: the trigger is suspended (spec.suspend)")


def test_the_schedule_fires_without_cooldown_and_skips_a_blocked_run() -> None:
    run = Run(spec(schedule="*/30 * * * *"))
    run.at(0, STRAGGLER)  # fires: t-1 (12:00 is not after the creation time)
    run.finish_all()
    scheduled = run.at(31)  # 12:30 is due; the straggler's cooldown does not apply to the schedule
    assert scheduled.fire is not None and scheduled.fire.condition is TriggerCondition.SCHEDULE
    assert scheduled.fire.message == "scheduled run of 2026-03-01T12:30:00Z (*/30 * * * *)"
    skipped = run.at(61)  # 13:00 is due but t-2 still runs: skipped, not queued
    assert skipped.fire is None and "scheduled run of 2026-03-01T13:00:00Z skipped: session t-2" in skipped.message
    run.finish_all()
    assert run.at(62).fire is None


def test_history_limits_prune_the_oldest_finished_sessions() -> None:
    owned = [
        Owned(f"t-{i}", f"2026-03-01T12:0{i}:00Z", phase)
        for i, phase in enumerate(
            ["Succeeded", "Failed", "PartiallySucceeded", "Succeeded", "Failed", "Capturing", "Succeeded"]
        )
    ]
    assert to_prune(spec(successfulSessionsHistoryLimit=2, failedSessionsHistoryLimit=1), owned) == [
        "t-0",
        "t-2",
        "t-1",
    ]
    assert to_prune(spec(successfulSessionsHistoryLimit=0, failedSessionsHistoryLimit=0), owned[5:]) == ["t-6"]


def test_the_session_is_owned_labelled_annotated_and_valid() -> None:
    trigger = {"metadata": {"name": "ddp-watch", "namespace": "team-a", "uid": "uid-1"}}
    body = build_session(trigger, spec(), STALL, 3)
    meta = body["metadata"]
    assert meta["name"] == "ddp-watch-3" and meta["namespace"] == "team-a"
    assert meta["labels"] == {TRIGGER_LABEL: "ddp-watch"}
    assert meta["annotations"]["stepscope.dev/trigger-condition"] == "Stall"
    assert meta["annotations"]["stepscope.dev/trigger-reason"] == STALL.message
    (owner,) = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "stepscope.dev/v1alpha1",
        "kind": "ProfileTrigger",
        "name": "ddp-watch",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    session = ProfileSessionSpec.model_validate(body["spec"])
    assert session.targets.job_ref is not None and session.targets.job_ref.name == "train"
    assert session.capture.step_timeout_seconds == 120  # a stall's session declares the hang at once
    straggler = ProfileSessionSpec.model_validate(build_session(trigger, spec(), STRAGGLER, 4)["spec"])
    assert straggler.capture.step_timeout_seconds == 600


def test_long_names_stay_within_kubernetes_limits() -> None:
    name = "a" * 200
    assert len(session_name(name, 12345)) <= 52 and session_name(name, 1) != session_name("a" * 199 + "b", 1)
    label = trigger_label(name)
    assert len(label) <= 63 and label != trigger_label("a" * 199 + "b")
