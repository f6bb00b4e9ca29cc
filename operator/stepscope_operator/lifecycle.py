"""One session's lifecycle, advanced one tick at a time. All durable state is in the CR; `memo` only caches
what can be rebuilt (pod addresses, which targets this process has already talked to)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from stepscope_contract.constants import ACCEPTED_SPEC_ANNOTATION
from stepscope_contract.errors import describe_validation_error
from stepscope_contract.session import (
    ConditionType,
    JobKind,
    Phase,
    ProfileSessionSpec,
    TargetState,
    TargetStatus,
)
from stepscope_contract.session_folder import session_folder
from stepscope_contract.wire import CaptureOptions, CaptureRequest, SessionRef, StorageDestination
from stepscope_operator import status as st
from stepscope_operator.config import OperatorConfig
from stepscope_operator.jobs import build_job, job_name, job_outcome, shard_count
from stepscope_operator.kube import Kube
from stepscope_operator.sidecar_client import Reply, SidecarClient
from stepscope_operator.targets import (
    JOBSET_API,
    TRAINJOB_API,
    JobSetLayout,
    Resolution,
    Target,
    candidate_selectors,
    capture_id,
    jobset_layout,
    resolve_targets,
)

MAX_GET_FAILURES = 5


@dataclass
class Memo:
    """Per-session cache in this operator process. Lost on restart and rebuilt from the CR and the sidecars."""

    addresses: dict[str, Target] = field(default_factory=dict)
    states: dict[str, TargetStatus] = field(default_factory=dict)
    verified: set[str] = field(default_factory=set)  # pods whose sidecar state this process knows first-hand
    get_failures: dict[str, int] = field(default_factory=dict)


@dataclass
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class Outcome:
    status: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)


@dataclass
class Deps:
    kube: Kube
    sidecars: SidecarClient
    config: OperatorConfig


class Tick:
    """The state of one tick: the body as read, and the status being built."""

    def __init__(self, body: dict[str, Any], memo: Memo, deps: Deps, now: datetime) -> None:
        self.body = body
        self.meta = body.get("metadata") or {}
        self.name: str = self.meta.get("name", "")
        self.namespace: str = self.meta.get("namespace", "default")
        self.uid: str = self.meta.get("uid", "")
        self.generation: int = int(self.meta.get("generation", 1) or 1)
        self.memo = memo
        self.deps = deps
        self.now = now
        self.status: dict[str, Any] = dict(body.get("status") or {})
        self.out = Outcome()
        self.conditions: list[dict[str, Any]] = list(self.status.get("conditions") or [])

    # -- small helpers -------------------------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        try:
            return Phase(self.status.get("phase", Phase.PENDING.value))
        except ValueError:
            return Phase.PENDING

    def set(self, **fields: Any) -> None:
        self.status.update(fields)
        self.out.status.update(fields)

    def cond(self, type_: ConditionType, value: bool | None, reason: str, message: str) -> None:
        self.conditions = st.set_condition(
            self.conditions, type_, value, reason=reason, message=message, now=self.now, generation=self.generation
        )
        self.set(conditions=self.conditions)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.out.events.append(Event("Warning" if warning else "Normal", reason, message))

    def move(self, phase: Phase, message: str, warning: bool = False) -> None:
        if phase is not self.phase or self.status.get("message") != message:
            self.event(phase.value, message, warning)
        self.set(phase=phase.value, message=message)

    def fail(self, reason: str, message: str) -> None:
        self.cond(ConditionType.FAILED, True, reason, message)
        self.cond(ConditionType.COMPLETE, False, reason, message)
        self.set(completionTime=st.iso(self.now))
        self.move(Phase.FAILED, message, warning=True)

    def spec(self) -> ProfileSessionSpec:
        """The spec accepted at start (storage defaults filled in; later edits are ignored), else the current one."""
        accepted = (self.meta.get("annotations") or {}).get(ACCEPTED_SPEC_ANNOTATION)
        if accepted:
            return ProfileSessionSpec.model_validate(json.loads(accepted))
        return effective_spec(ProfileSessionSpec.model_validate(self.body.get("spec") or {}), self.deps.config)

    def deadline(self) -> datetime | None:
        text = self.status.get("captureDeadline")
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def effective_spec(spec: ProfileSessionSpec, config: OperatorConfig) -> ProfileSessionSpec:
    """The spec with the install's storage settings filling what it leaves out."""
    storage = config.storage.apply(spec.storage)
    return spec if storage is spec.storage else spec.model_copy(update={"storage": storage})


# -- phases -------------------------------------------------------------------------------------------------


def _accept(t: Tick) -> bool:
    try:
        spec = effective_spec(ProfileSessionSpec.model_validate(t.body.get("spec") or {}), t.deps.config)
    except ValidationError as exc:
        message = f"invalid spec: {describe_validation_error(exc)}"
        t.cond(ConditionType.ACCEPTED, False, "InvalidSpec", message)
        t.set(observedGeneration=t.generation)
        t.fail("InvalidSpec", message)
        return False
    location = session_folder(spec, t.namespace, t.name, t.uid)
    t.out.annotations[ACCEPTED_SPEC_ANNOTATION] = json.dumps(spec.wire(), separators=(",", ":"), sort_keys=True)
    t.meta.setdefault("annotations", {})[ACCEPTED_SPEC_ANNOTATION] = t.out.annotations[ACCEPTED_SPEC_ANNOTATION]
    t.cond(ConditionType.ACCEPTED, True, "SpecValid", "the spec is valid")
    t.set(
        observedGeneration=t.generation,
        captureId=capture_id(t.uid),
        startTime=st.iso(t.now),
        captureDeadline=st.iso(t.now + timedelta(seconds=spec.capture.timeout_seconds)),
        artifactsUri=location.uri,
        progress="0/0",
    )
    t.move(Phase.RESOLVING, "looking for target pods")
    return True


async def _holders(t: Tick, pods: set[str]) -> list[tuple[str, list[str]]]:
    """Other active sessions in the namespace that already hold some of these pods (older ones first)."""
    mine = (t.meta.get("creationTimestamp") or "", t.name)
    holders = []
    for other in await t.deps.kube.list_sessions(t.namespace):
        ometa = other.get("metadata") or {}
        if ometa.get("uid") == t.uid:
            continue
        ostatus = other.get("status") or {}
        if ostatus.get("phase") not in (Phase.CAPTURING.value, Phase.UPLOADING.value, Phase.RESOLVING.value):
            continue
        if (ometa.get("creationTimestamp") or "", ometa.get("name", "")) > mine:
            continue
        held = sorted(pods & {x.get("pod") for x in ostatus.get("targets") or []})
        if held:
            holders.append((ometa.get("name", ""), held))
    return holders


async def _job_layout(t: Tick, spec: ProfileSessionSpec) -> tuple[JobSetLayout | None, str]:
    """For a JobSet or TrainJob reference: the JobSet's rank layout, or why there is none yet ('' = go on without)."""
    ref = spec.targets.job_ref
    if ref is None or ref.kind not in (JobKind.JOB_SET, JobKind.TRAIN_JOB):
        return None, ""
    train = ref.kind is JobKind.TRAIN_JOB
    if train and await t.deps.kube.get_custom(TRAINJOB_API, t.namespace, ref.name) is None:
        return None, f"TrainJob {ref.name} does not exist in namespace {t.namespace}"
    jobset = await t.deps.kube.get_custom(JOBSET_API, t.namespace, ref.name)
    if jobset is None:  # a plain JobSet's pods still carry their indexes; a TrainJob's JobSet is on its way
        return None, f"TrainJob {ref.name} has no JobSet yet" if train else ""
    return jobset_layout(jobset, trainer_only=train), ""


async def _find_targets(t: Tick, spec: ProfileSessionSpec) -> Resolution:
    """The session's pods: the first candidate label selector that finds any wins."""
    pods: list[dict[str, Any]] = []
    tried = candidate_selectors(spec.targets)
    searched = f"namespace {t.namespace}, label selector {' or '.join(repr(s) for s in tried)}"
    layout, missing = await _job_layout(t, spec)
    if missing:
        return Resolution((), missing, searched)
    for selector in tried:
        pods = await t.deps.kube.list_pods(t.namespace, selector)
        if pods:
            break
    return resolve_targets(pods, spec.targets, searched, layout)


def _wait_for_targets(t: Tick, spec: ProfileSessionSpec, resolution: Resolution) -> bool:
    """Whether to keep waiting (within targets.waitSeconds of the start) for pods to appear or become Ready."""
    started = st.parse_time(t.status.get("startTime")) or t.now
    until = started + timedelta(seconds=spec.targets.wait_seconds)
    if t.now >= until:
        return False
    if resolution.targets:
        if not resolution.starting:
            return False
        why = f"{len(resolution.targets)} pod(s) Ready, {resolution.starting} still starting ({resolution.searched})"
    else:
        why = resolution.reason
    message = f"waiting for targets until {st.iso(until)} (targets.waitSeconds {spec.targets.wait_seconds}): {why}"
    t.cond(ConditionType.TARGETS_RESOLVED, False, "WaitingForTargets", message)
    if t.status.get("message") != message:
        t.event("WaitingForTargets", message)
    t.set(phase=Phase.RESOLVING.value, message=message)
    return True


async def _resolve(t: Tick) -> bool:
    spec = t.spec()
    resolution = await _find_targets(t, spec)
    searched = resolution.searched
    if _wait_for_targets(t, spec, resolution):
        return False
    if not resolution.targets:
        reason = resolution.reason + (
            f" (waited {spec.targets.wait_seconds}s, targets.waitSeconds)" if spec.targets.wait_seconds else ""
        )
        t.cond(ConditionType.TARGETS_RESOLVED, False, "NoTargets", reason)
        t.fail("NoTargets", reason)
        return False
    holders = await _holders(t, {x.pod for x in resolution.targets})
    if holders:
        deadline = t.deadline()
        text = "; ".join(f"session {name} holds pod(s) {', '.join(pods_[:5])}" for name, pods_ in holders)
        if deadline is not None and t.now >= deadline:
            t.cond(ConditionType.TARGETS_RESOLVED, False, "PodsBusy", text)
            t.fail("PodsBusy", f"gave up waiting: {text}; one session profiles a pod at a time")
            return False
        t.cond(ConditionType.TARGETS_RESOLVED, False, "WaitingForSession", f"waiting: {text}")
        t.set(message=f"waiting: {text}")
        return False
    t.memo.addresses = {x.pod: x for x in resolution.targets}
    t.memo.states = {
        x.pod: TargetStatus(pod=x.pod, node=x.node, rank=x.rank, last_transition_time=t.now) for x in resolution.targets
    }
    t.memo.verified = set(t.memo.addresses)  # nobody has signalled them: this process starts them
    count = len(resolution.targets)
    t.cond(ConditionType.TARGETS_RESOLVED, True, "TargetsFound", f"{count} pod(s): {searched}")
    # The capture's deadline runs from here: time spent waiting for pods is not taken from it.
    t.set(captureDeadline=st.iso(t.now + timedelta(seconds=spec.capture.timeout_seconds)))
    _write_targets(t)
    t.move(Phase.CAPTURING, f"signalling {count} sidecar(s)")
    return True


def _write_targets(t: Tick) -> None:
    states = list(t.memo.states.values())
    counts = st.count_targets(states)
    listed, truncated = st.bounded(states)
    t.set(counts=counts.wire(), progress=st.progress(counts), targets=listed, targetsTruncated=truncated)


async def _rebuild(t: Tick) -> None:
    """After a restart: addresses from the pods, states from the CR; unknown states are asked of the sidecars."""
    resolution = await _find_targets(t, t.spec())
    known = {x.get("pod"): TargetStatus.model_validate(x) for x in t.status.get("targets") or []}
    truncated = bool(t.status.get("targetsTruncated"))
    t.memo.addresses = {x.pod: x for x in resolution.targets}
    for pod, state in known.items():
        t.memo.states[pod] = state
    if truncated:  # targets beyond the status bound: recover them from the pods
        for x in resolution.targets:
            t.memo.states.setdefault(x.pod, TargetStatus(pod=x.pod, node=x.node, rank=x.rank))
    for pod, state in t.memo.states.items():
        if not state.state.terminal and pod not in t.memo.addresses:
            t.memo.states[pod] = _changed(state, TargetState.FAILED, "the pod is gone or no longer Ready", t.now)


def _changed(old: TargetStatus, state: TargetState, message: str, now: datetime, **extra: Any) -> TargetStatus:
    moved = old.state is not state
    return old.model_copy(
        update={
            "state": state,
            "message": message[:1000],
            "last_transition_time": now if moved else old.last_transition_time,
            **extra,
        }
    )


def _request(t: Tick, spec: ProfileSessionSpec, target: Target) -> CaptureRequest:
    return CaptureRequest(
        capture_id=t.status["captureId"],
        session=SessionRef(namespace=t.namespace, name=t.name, uid=t.uid),
        rank=target.rank,
        options=CaptureOptions.from_spec(spec.capture),
        destination=StorageDestination(
            # recomputed, never taken from status.artifactsUri (which the analyzer's ServiceAccount can patch)
            session_uri=session_folder(spec, t.namespace, t.name, t.uid).uri,
            endpoint=spec.storage.endpoint,
            region=spec.storage.region,
            addressing_style=spec.storage.addressing_style,
        ),
    )


def _apply_reply(t: Tick, pod: str, reply: Reply) -> None:
    old = t.memo.states[pod]
    assert reply.status is not None
    capture = reply.status
    state = st.target_state(capture.state)
    uri = capture.artifacts[0].uri.rsplit("/", 1)[0] if capture.artifacts else old.artifact_uri
    t.memo.states[pod] = _changed(old, state, capture.message, t.now, artifact_uri=uri)
    t.memo.verified.add(pod)
    t.memo.get_failures.pop(pod, None)


async def _poll_one(t: Tick, spec: ProfileSessionSpec, pod: str) -> None:
    target = t.memo.addresses[pod]
    cid = t.status["captureId"]
    old = t.memo.states[pod]
    if pod not in t.memo.verified:
        # This process has not talked to this sidecar: ask before starting, so nothing is started twice.
        reply = await t.deps.sidecars.get(target, cid)
        if reply.ok:
            _apply_reply(t, pod, reply)
            return
        if reply.http_status != 404:
            _get_failed(t, pod, reply)
            return
        t.memo.verified.add(pod)
        old = old.model_copy(update={"state": TargetState.PENDING})
        t.memo.states[pod] = old
    if old.state is TargetState.PENDING:
        reply = await t.deps.sidecars.start(target, _request(t, spec, target))
        attempts = old.attempts + 1
        if reply.ok:
            t.memo.states[pod] = old.model_copy(update={"attempts": attempts})
            _apply_reply(t, pod, reply)
        else:
            t.memo.states[pod] = _changed(
                old, TargetState.FAILED, f"start refused: {reply.error}", t.now, attempts=attempts
            )
        return
    reply = await t.deps.sidecars.get(target, cid)
    if reply.ok:
        _apply_reply(t, pod, reply)
    else:
        _get_failed(t, pod, reply)


def _get_failed(t: Tick, pod: str, reply: Reply) -> None:
    failures = t.memo.get_failures.get(pod, 0) + 1
    t.memo.get_failures[pod] = failures
    old = t.memo.states[pod]
    if failures >= MAX_GET_FAILURES or reply.http_status in (401, 404):
        t.memo.states[pod] = _changed(old, TargetState.FAILED, f"sidecar lost: {reply.error}", t.now)
    else:
        t.memo.states[pod] = old.model_copy(update={"message": f"status unknown: {reply.error}"[:1000]})


async def _capture(t: Tick) -> None:
    spec = t.spec()
    if not t.memo.addresses and not t.memo.states:
        await _rebuild(t)
    live = [pod for pod, s in t.memo.states.items() if not s.state.terminal and pod in t.memo.addresses]
    await asyncio.gather(*(_poll_one(t, spec, pod) for pod in live))
    deadline = t.deadline()
    if deadline is not None and t.now >= deadline:
        late = [pod for pod, s in t.memo.states.items() if not s.state.terminal]
        for pod in late:
            old = t.memo.states[pod]
            t.memo.states[pod] = _changed(
                old,
                TargetState.FAILED,
                f"capture deadline ({spec.capture.timeout_seconds}s) passed while {old.state.value}"
                + (f": {old.message}" if old.message else ""),
                t.now,
            )
            if pod in t.memo.addresses:
                await t.deps.sidecars.abort(t.memo.addresses[pod], t.status["captureId"])
    _write_targets(t)
    states = list(t.memo.states.values())
    if any(not s.state.terminal for s in states):
        phase = st.capture_phase(states)
        counts = st.count_targets(states)
        t.move(phase, f"{counts.captured}/{counts.total} captured, {counts.active + counts.pending} in progress")
        return
    usable = [s for s in states if s.state in (TargetState.CAPTURED, TargetState.HUNG)]
    summary = st.failure_summary(states)
    if not usable:
        t.cond(ConditionType.CAPTURED, False, "NothingCaptured", summary)
        t.fail("NothingCaptured", f"no target was captured: {summary}")
        return
    t.cond(
        ConditionType.CAPTURED,
        True,
        "AllTargetsTerminal",
        f"{len(usable)}/{len(states)} usable" + (f"; {summary}" if summary else ""),
    )
    if not spec.analysis.enabled:
        t.cond(ConditionType.COMPLETE, True, "AnalysisDisabled", "traces captured; analysis disabled by the spec")
        t.cond(ConditionType.FAILED, False, "AnalysisDisabled", "")
        t.set(completionTime=st.iso(t.now))
        t.move(st.final_phase(states), "traces captured; analysis disabled")
        return
    await _start_analysis(t, spec, len(usable))


async def _start_analysis(t: Tick, spec: ProfileSessionSpec, ranks: int) -> None:
    shards = shard_count(spec, ranks, t.deps.config)
    mode = "all" if shards == 1 else "map"
    job = build_job(
        session=t.name, namespace=t.namespace, uid=t.uid, spec=spec, config=t.deps.config, mode=mode, shards=shards
    )
    created = await t.deps.kube.create_job(t.namespace, job)
    name = created["metadata"]["name"]
    t.set(analyzerJob=name)
    t.move(Phase.ANALYZING, f"analyzer Job {name} started" + (f" ({shards} shards)" if shards > 1 else ""))


async def _analyze(t: Tick) -> None:
    spec = t.spec()
    name = t.status.get("analyzerJob") or job_name(t.name, "analyze")
    job = await t.deps.kube.get_job(t.namespace, name)
    outcome, message = job_outcome(job)
    if outcome == "running":
        return
    if outcome in ("failed", "missing"):
        fresh = await t.deps.kube.get_session(t.namespace, t.name) or t.body
        report = st.condition((fresh.get("status") or {}).get("conditions") or [], ConditionType.REPORT_READY)
        detail = f"; analyzer: {report.get('message')}" if report and report.get("message") else ""
        t.conditions = _merge_foreign(t.conditions, fresh)
        t.fail("AnalysisFailed", f"analyzer Job {name} {outcome}: {message}{detail}")
        return
    if name.endswith("-analyze-map"):
        shards = int((job or {}).get("spec", {}).get("completions", 1))
        reduce_job = build_job(
            session=t.name,
            namespace=t.namespace,
            uid=t.uid,
            spec=spec,
            config=t.deps.config,
            mode="reduce",
            shards=shards,
        )
        created = await t.deps.kube.create_job(t.namespace, reduce_job)
        t.set(analyzerJob=created["metadata"]["name"])
        t.move(Phase.ANALYZING, f"per-rank summaries done; reduce Job {created['metadata']['name']} started")
        return
    fresh = await t.deps.kube.get_session(t.namespace, t.name) or t.body
    t.conditions = _merge_foreign(t.conditions, fresh)
    report = st.condition(t.conditions, ConditionType.REPORT_READY)
    if not report or report.get("status") != "True":
        t.set(conditions=t.conditions)
        t.fail("NoReport", f"analyzer Job {name} succeeded but wrote no report")
        return
    states = [TargetStatus.model_validate(x) for x in t.status.get("targets") or []]
    phase = st.final_phase(states) if states else Phase.SUCCEEDED
    if t.status.get("targetsTruncated"):
        counts = t.status.get("counts") or {}
        phase = Phase.SUCCEEDED if counts.get("captured") == counts.get("total") else Phase.PARTIALLY_SUCCEEDED
    verdict = ((fresh.get("status") or {}).get("summary") or {}).get("verdict") or "report ready"
    failures = st.failure_summary(states)
    t.cond(ConditionType.COMPLETE, True, phase.value, verdict)
    t.cond(ConditionType.FAILED, False, phase.value, "")
    t.set(completionTime=st.iso(t.now))
    t.move(phase, verdict + (f" (not captured: {failures})" if phase is Phase.PARTIALLY_SUCCEEDED else ""))


def _merge_foreign(mine: list[dict[str, Any]], fresh: dict[str, Any]) -> list[dict[str, Any]]:
    """Keep the conditions another writer (the analyzer) owns, as they are in the freshly read object."""
    theirs = [
        c
        for c in (fresh.get("status") or {}).get("conditions") or []
        if c.get("type") == ConditionType.REPORT_READY.value
    ]
    return [c for c in mine if c.get("type") != ConditionType.REPORT_READY.value] + theirs


def _changed_fields(t: Tick) -> list[str]:
    """Top-level spec fields that differ from the accepted spec (the CRD freezes most; this names what got by)."""
    try:
        current = effective_spec(ProfileSessionSpec.model_validate(t.body.get("spec") or {}), t.deps.config).wire()
        accepted = t.spec().wire()
    except (ValidationError, ValueError):
        return []
    return sorted(k for k in set(current) | set(accepted) if current.get(k) != accepted.get(k))


def _spec_drift(t: Tick) -> None:
    observed = t.status.get("observedGeneration")
    if observed is not None and t.generation > int(observed) and t.phase is not Phase.PENDING:
        fields = ", ".join(f"spec.{name}" for name in _changed_fields(t)) or "the spec"
        message = (
            f"{fields} changed after the session started (generation {t.generation}); the change is ignored and "
            f"the session runs with the spec of generation {observed}. Create a new ProfileSession instead."
        )
        accepted = st.condition(t.conditions, ConditionType.ACCEPTED)
        if not accepted or accepted.get("reason") != "SpecChangeIgnored" or accepted.get("message") != message:
            t.cond(ConditionType.ACCEPTED, False, "SpecChangeIgnored", message)
            t.event("SpecChangeIgnored", message, warning=True)


async def advance(body: dict[str, Any], memo: Memo, deps: Deps, now: datetime | None = None) -> Outcome:
    """Move the session as far as it can go now; the caller writes `Outcome.status` to the status subresource."""
    t = Tick(body, memo, deps, now or st.utcnow())
    if t.phase.terminal:
        return t.out
    _spec_drift(t)
    if t.phase is Phase.PENDING and not _accept(t):
        return t.out
    if t.phase is Phase.RESOLVING and not await _resolve(t):
        return t.out
    if t.phase in (Phase.CAPTURING, Phase.UPLOADING):
        await _capture(t)
    elif t.phase is Phase.ANALYZING:
        await _analyze(t)
    return t.out


async def abort_all(body: dict[str, Any], memo: Memo, deps: Deps) -> list[str]:
    """On delete: abort every target that is not terminal. Returns the pods that were sent an abort."""
    t = Tick(body, memo, deps, st.utcnow())
    if t.phase not in (Phase.CAPTURING, Phase.UPLOADING) or not t.status.get("captureId"):
        return []
    if not memo.addresses:
        await _rebuild(t)
    pods = [pod for pod, s in memo.states.items() if not s.state.terminal and pod in memo.addresses]
    await asyncio.gather(*(deps.sidecars.abort(memo.addresses[p], t.status["captureId"]) for p in pods))
    return pods
