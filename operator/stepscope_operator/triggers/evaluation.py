"""One evaluation of a ProfileTrigger: read, resolve its pods, pull their step telemetry, judge the conditions
(`trigger_conditions`), decide (`trigger_policy`), create or prune sessions, and return the status and events to write.
Everything durable is in the trigger's status; nothing is kept in memory between evaluations, so a restarted operator
goes on where it was (a session created just before a crash is found again by its name and adopted)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from stepscope_contract.constants import TRIGGER_LABEL
from stepscope_contract.errors import describe_validation_error
from stepscope_contract.finite import finite_wire
from stepscope_contract.session import JobKind, TargetSpec
from stepscope_contract.step_telemetry import MAX_STEPS_PER_REQUEST, RankSteps
from stepscope_contract.trigger import (
    ProfileTriggerSpec,
    ProfileTriggerStatus,
    TelemetryObservation,
    TriggerStatusConditionType,
)
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.runtime.kube import Kube
from stepscope_operator.session.status import parse_time
from stepscope_operator.session.targets import (
    JOBSET_API,
    Resolution,
    candidate_selectors,
    jobset_layout,
    resolve_targets,
)
from stepscope_operator.triggers import metrics as trigger_metrics
from stepscope_operator.triggers.conditions import Finding, Verdict, evaluate
from stepscope_operator.triggers.policy import Decision, Owned, decide, record_fire, refresh_sessions, set_condition
from stepscope_operator.triggers.policy import to_prune as sessions_to_prune
from stepscope_operator.triggers.sessions import build_session, owned_by, trigger_label
from stepscope_operator.triggers.telemetry_client import Pull, TelemetryClient

OBSERVED_STEPS = 20  # steps behind the status's median step time and steps per second
DEFAULT_INTERVAL = 30


@dataclass
class TriggerDeps:
    kube: Kube
    telemetry: TelemetryClient
    config: OperatorConfig


@dataclass
class TriggerOutcome:
    status: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


def evaluation_due(body: dict[str, Any], now: datetime) -> bool:
    """An evaluation is due at the trigger's interval, or at once after a spec change."""
    status = body.get("status") or {}
    last = parse_time(status.get("lastEvaluationTime"))
    generation = (body.get("metadata") or {}).get("generation")
    if last is None or status.get("observedGeneration") != generation:
        return True
    interval = (body.get("spec") or {}).get("evaluationIntervalSeconds", DEFAULT_INTERVAL)
    return now >= last + timedelta(seconds=float(interval) if isinstance(interval, int | float) else DEFAULT_INTERVAL)


def steps_needed(spec: ProfileTriggerSpec) -> int:
    """How many recent steps per rank to pull: room for the conditions' windows, and the steps a capture marks."""
    need = OBSERVED_STEPS
    if spec.conditions.straggler is not None:
        need = max(need, spec.conditions.straggler.steps)
    if spec.conditions.step_time_regression is not None:
        regression = spec.conditions.step_time_regression
        need = max(need, regression.steps + regression.baseline_steps)
    return min(MAX_STEPS_PER_REQUEST, need + 64)


async def resolve(kube: Kube, namespace: str, targets: TargetSpec) -> Resolution:
    """The trigger's pods, as a session would resolve them (the JobSet's layout for JobSet and TrainJob refs)."""
    tried = candidate_selectors(targets)
    searched = f"namespace {namespace}, label selector {' or '.join(repr(s) for s in tried)}"
    layout = None
    ref = targets.job_ref
    if ref is not None and ref.kind in (JobKind.JOB_SET, JobKind.TRAIN_JOB):
        jobset = await kube.get_custom(JOBSET_API, namespace, ref.name)
        layout = jobset_layout(jobset, trainer_only=ref.kind is JobKind.TRAIN_JOB) if jobset else None
    pods: list[dict[str, Any]] = []
    for selector in tried:
        pods = await kube.list_pods(namespace, selector)
        if pods:
            break
    return resolve_targets(pods, targets, searched, layout)


def observe(pods: int, pull: Pull) -> TelemetryObservation:
    def recent(values: list[float], flags: list[bool]) -> list[float]:
        kept = [v for v, p in zip(values, flags, strict=False) if not p]
        return kept[-OBSERVED_STEPS:]

    medians, rates = [], []
    for steps in pull.ranks:
        durations = recent(steps.duration_ms, steps.profiled)
        if durations:
            medians.append(statistics.median(durations))
            rates.append(1000.0 / statistics.median(durations) if statistics.median(durations) > 0 else 0.0)
    stalls = [r.seconds_since_last_step for r in pull.ranks if r.seconds_since_last_step is not None and not r.closed]
    return TelemetryObservation(
        pods=pods,
        pods_answered=pull.answered,
        ranks=len(pull.ranks),
        median_step_ms=round(statistics.median(medians), 3) if medians else None,
        steps_per_second=round(statistics.median(rates), 3) if rates else None,
        max_seconds_since_last_step=round(max(stalls), 1) if stalls else None,
    )


def status_patch(status: ProfileTriggerStatus) -> dict[str, Any]:
    """The status as a merge patch: unset top-level fields as null (removed), no nulls inside (schema-valid), no NaN
    or Infinity anywhere (stepscope_contract.finite)."""
    patch: dict[str, Any] = finite_wire(status.model_dump(mode="json", by_alias=True, exclude_none=True))
    for name, info in ProfileTriggerStatus.model_fields.items():
        alias = info.alias or name
        if getattr(status, name) is None:
            patch[alias] = None
    return patch


def _owned(items: list[dict[str, Any]], uid: str) -> list[Owned]:
    return [
        Owned(
            name=str(s["metadata"]["name"]),
            created=str(s["metadata"].get("creationTimestamp") or ""),
            phase=(s.get("status") or {}).get("phase"),
        )
        for s in items
        if owned_by(s, uid)
    ]


class Evaluation:
    """The state of one evaluation: the trigger as read, and the status and events being built."""

    def __init__(self, body: dict[str, Any], deps: TriggerDeps, now: datetime) -> None:
        self.body = body
        self.meta = body.get("metadata") or {}
        self.name = str(self.meta.get("name", ""))
        self.namespace = str(self.meta.get("namespace") or "default")
        self.uid = str(self.meta.get("uid", ""))
        self.generation = int(self.meta.get("generation") or 1)
        self.deps = deps
        self.now = now
        try:
            self.status = ProfileTriggerStatus.model_validate(body.get("status") or {})
        except ValidationError:
            self.status = ProfileTriggerStatus()  # unreadable (edited by hand): start over
        self.out = TriggerOutcome()

    def condition(self, type_: TriggerStatusConditionType, value: bool, reason: str, message: str) -> None:
        old = next((c for c in self.status.conditions if c.type is type_), None)
        conditions = set_condition(
            self.status.conditions,
            type_,
            value,
            reason=reason,
            message=message,
            now=self.now,
            generation=self.generation,
        )
        self.status = self.status.model_copy(update={"conditions": conditions})
        if not value and (old is None or old.status != "False" or old.message != message):
            self.out.events.append(("Warning", reason, message))

    def finish(self, message: str) -> TriggerOutcome:
        self.status = self.status.model_copy(
            update={"last_evaluation_time": self.now, "observed_generation": self.generation, "message": message[:4000]}
        )
        self.out.status = status_patch(self.status)
        return self.out

    async def owned(self) -> list[Owned]:
        selector = f"{TRIGGER_LABEL}={trigger_label(self.name)}"
        return _owned(await self.deps.kube.list_sessions_selected(self.namespace, selector), self.uid)

    async def fire(self, spec: ProfileTriggerSpec, finding: Finding) -> str:
        """Create the session; its name, or '' (and why, in the status) when it could not be."""
        body = build_session(self.body, spec, finding, self.status.session_count + 1)
        session, created = await self.deps.kube.create_session(self.namespace, body)
        name = str(body["metadata"]["name"])
        if not created and not owned_by(session, self.uid):
            self.out.events.append(("Warning", "NameTaken", f"ProfileSession {name} exists and is not this trigger's"))
            return ""
        self.status = record_fire(self.status, name, finding, self.now)
        self.out.events.append(
            ("Normal", "Fired", f"{finding.condition.value}: {finding.message}; created ProfileSession {name}")
        )
        trigger_metrics.FIRES.labels(condition=finding.condition.value).inc()
        return name

    async def prune(self, spec: ProfileTriggerSpec, owned: list[Owned]) -> list[Owned]:
        doomed = sessions_to_prune(spec, owned)
        for name in doomed:
            await self.deps.kube.delete_session(self.namespace, name)
        if doomed:
            self.out.events.append(("Normal", "SessionsDeleted", f"history limits: deleted {', '.join(doomed)}"))
        return [s for s in owned if s.name not in doomed]


def _telemetry_note(pull: Pull, resolution: Resolution) -> tuple[bool, str, str]:
    """(available, reason, message) for the TelemetryAvailable condition."""
    if not resolution.targets:
        return False, "NoTargets", resolution.reason
    if not pull.ranks:
        why = pull.describe_failures() or "no rank has recorded a step yet"
        return False, "NoTelemetry", f"no step telemetry from {len(resolution.targets)} pod(s): {why}"
    message = f"{len(pull.ranks)} rank(s) from {pull.answered}/{len(resolution.targets)} pod(s)"
    if pull.failures:
        message += f"; not answering: {pull.describe_failures()}"
    return True, "StepsReceived", message


async def _judge(e: Evaluation, spec: ProfileTriggerSpec) -> Verdict:
    resolution = await resolve(e.deps.kube, e.namespace, spec.targets)
    pull = Pull()
    if resolution.targets:
        pull = await e.deps.telemetry.pull(resolution.targets, steps_needed(spec), spec.targets.rank_set())
    available, reason, message = _telemetry_note(pull, resolution)
    e.condition(TriggerStatusConditionType.TELEMETRY_AVAILABLE, available, reason, message)
    e.status = e.status.model_copy(update={"observed": observe(len(resolution.targets), pull)})
    ranks: tuple[RankSteps, ...] = pull.ranks
    return evaluate(ranks, spec.conditions) if ranks else Verdict(notes=(message,))


def _created(e: Evaluation) -> datetime:
    return parse_time(e.meta.get("creationTimestamp")) or e.now


async def _act(e: Evaluation, spec: ProfileTriggerSpec, decision: Decision) -> str:
    """Fire when decided; the status message."""
    e.status = e.status.model_copy(
        update={
            "condition": decision.condition,
            "condition_since": decision.condition_since,
            "episode_fired": decision.episode_fired,
            "last_schedule_time": decision.last_schedule_time,
        }
    )
    e.out.events.extend(decision.events)
    if decision.fire is None:
        return decision.message
    name = await e.fire(spec, decision.fire)
    return f"{decision.message}; created ProfileSession {name}" if name else decision.message


async def run(body: dict[str, Any], deps: TriggerDeps, now: datetime) -> TriggerOutcome | None:
    """Evaluate the trigger if an evaluation is due; None when it is not."""
    if not evaluation_due(body, now):
        return None
    e = Evaluation(body, deps, now)
    try:
        spec = ProfileTriggerSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        message = f"invalid spec: {describe_validation_error(exc)}"
        e.condition(TriggerStatusConditionType.ACCEPTED, False, "InvalidSpec", message)
        trigger_metrics.EVALUATIONS.labels(result="invalid").inc()
        return e.finish(message)
    e.condition(TriggerStatusConditionType.ACCEPTED, True, "SpecValid", "the spec is valid")
    verdict = await _judge(e, spec)
    owned = await e.owned()
    decision = decide(spec, e.status, verdict, owned, created=_created(e), now=now)
    message = await _act(e, spec, decision)
    owned = await e.prune(spec, await e.owned() if decision.fire is not None else owned)
    e.status = refresh_sessions(e.status, owned)
    result = "fired" if decision.fire is not None else ("holds" if verdict.first is not None else "quiet")
    trigger_metrics.EVALUATIONS.labels(result=result).inc()
    return e.finish(message)
