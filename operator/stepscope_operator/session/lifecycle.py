"""One session's lifecycle, advanced one tick at a time. All durable state is in the CR; `memo` only caches
what can be rebuilt (pod addresses, which targets this process has already talked to).

The status is the contract's ProfileSessionStatus, read once per tick, changed through its typed fields and written
back as the merge patch of what changed (status.status_patch): a misspelt field is a type error, not a key the CRD
would silently prune."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from stepscope_contract.analysis_documents import AnalysisOutcome, SessionDocument
from stepscope_contract.constants import ACCEPTED_SPEC_ANNOTATION
from stepscope_contract.errors import describe_validation_error
from stepscope_contract.session import (
    AnalysisStage,
    ConditionStatus,
    ConditionType,
    JobKind,
    Phase,
    ProfileSessionSpec,
    ProfileSessionStatus,
    ReportSummary,
    TargetState,
    TargetStatus,
)
from stepscope_contract.session_folder import session_folder
from stepscope_contract.status_wire import (
    MAX_MESSAGE,
    apply_outcome,
    condition,
    read_status,
    set_condition,
    status_patch,
)
from stepscope_contract.storage import REPORT_HTML, REPORT_JSON, RankFile, rank_file_of, report_location
from stepscope_contract.wire import CaptureOptions, CaptureRequest, SessionRef, StorageDestination
from stepscope_operator.runtime import metrics as prometheus_metrics
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.runtime.kube import Kube
from stepscope_operator.session import pod_faults
from stepscope_operator.session import status as st
from stepscope_operator.session.analyzer_jobs import (
    build_job,
    job_name,
    job_outcome,
    outcome_disagreement,
    outcome_from_pods,
    shard_count,
)
from stepscope_operator.session.targets import (
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
from stepscope_operator.sidecars import bounded_each, poll_pacing
from stepscope_operator.sidecars.client import Reply, SidecarClient, StartBodies

MAX_GET_FAILURES = 5


@dataclass
class Memo:
    """Per-session cache in this operator process. Lost on restart and rebuilt from the CR and the sidecars."""

    addresses: dict[str, Target] = field(default_factory=dict)
    states: dict[str, TargetStatus] = field(default_factory=dict)
    verified: set[str] = field(default_factory=set)  # pods whose sidecar state this process knows first-hand
    get_failures: dict[str, int] = field(default_factory=dict)
    summarised: set[str] = field(default_factory=set)  # pods whose sidecar uploaded its rank's summary (not rebuilt)
    polled: dict[str, datetime] = field(default_factory=dict)  # when each pod's sidecar was last asked (poll_pacing)
    pods_checked: datetime | None = None  # when the target pods' containers were last read (pod_faults)
    restarting: set[str] = field(default_factory=set)  # pods whose sidecar the kubelet is starting again
    aborting: set[asyncio.Task[Reply]] = field(default_factory=set)  # aborts sent to crashed ranks' sidecars


@dataclass
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class Outcome:
    status: dict[str, Any] = field(default_factory=dict)
    """merge patch of the status subresource: the wire form of the fields that changed"""
    phase: Phase = Phase.PENDING
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
        self.read = read_status(body.get("status"))
        self.status: ProfileSessionStatus = self.read.model_copy(deep=True)
        self.out = Outcome()

    # -- small helpers -------------------------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        return self.status.phase

    def finish(self) -> Outcome:
        """The outcome of this tick: what changed in status, as a merge patch."""
        self.out.status = status_patch(self.read, self.status)
        self.out.phase = self.status.phase
        return self.out

    def cond(self, type_: ConditionType, value: bool | None, reason: str, message: str) -> None:
        self.status.conditions = set_condition(
            self.status.conditions,
            type_,
            value,
            reason=reason,
            message=message,
            now=self.now,
            generation=self.generation,
        )

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.out.events.append(Event("Warning" if warning else "Normal", reason, message))

    def say(self, message: str) -> None:
        """Set status.message (cut to what the CRD allows)."""
        self.status.message = message[:MAX_MESSAGE]

    def move(self, phase: Phase, message: str, warning: bool = False) -> None:
        message = message[:MAX_MESSAGE]
        if phase is not self.phase or self.status.message != message:
            self.event(phase.value, message, warning)
        self.status.phase = phase
        self.status.message = message

    def fail(self, reason: str, message: str) -> None:
        """Enter Failed: `message` (why) is the session's message; the conditions carry `reason`."""
        self.cond(ConditionType.FAILED, True, reason, "")
        self.cond(ConditionType.COMPLETE, False, reason, "")
        self.finished(Phase.FAILED, message, warning=True, reason=reason)

    def finished(self, phase: Phase, message: str, warning: bool = False, reason: str = "") -> None:
        """Enter a terminal phase; `Finished=True` is what a pipeline waits on, whatever the outcome. `message` (the
        verdict, or why it failed) is told once, as the session's message; the Finished condition and the event say
        the outcome in their own words (st.finished_message)."""
        outcome = st.finished_message(phase, self.status.report_url, self.status.artifacts_uri, reason)
        self.cond(ConditionType.FINISHED, True, phase.value, outcome)
        self.status.completion_time = self.now
        self.event(phase.value, outcome, warning)
        self.status.phase = phase
        self.say(message)

    def spec(self) -> ProfileSessionSpec:
        """The spec accepted at start (storage defaults filled in; later edits are ignored), else the current one."""
        accepted = (self.meta.get("annotations") or {}).get(ACCEPTED_SPEC_ANNOTATION)
        if accepted:
            return ProfileSessionSpec.model_validate(json.loads(accepted))
        return effective_spec(ProfileSessionSpec.model_validate(self.body.get("spec") or {}), self.deps.config)

    def deadline(self) -> datetime | None:
        return self.status.capture_deadline

    def capture_id(self) -> str:
        cid = self.status.capture_id
        if not cid:
            raise ValueError("the session has no capture id yet")
        return cid


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
        t.cond(ConditionType.ACCEPTED, False, "InvalidSpec", "")  # why: the session's message
        t.status.observed_generation = t.generation
        t.fail("InvalidSpec", message)
        return False
    location = session_folder(spec, t.namespace, t.name, t.uid)
    t.out.annotations[ACCEPTED_SPEC_ANNOTATION] = json.dumps(spec.wire(), separators=(",", ":"), sort_keys=True)
    t.meta.setdefault("annotations", {})[ACCEPTED_SPEC_ANNOTATION] = t.out.annotations[ACCEPTED_SPEC_ANNOTATION]
    t.cond(ConditionType.ACCEPTED, True, "SpecValid", "the spec is valid")
    t.status.observed_generation = t.generation
    t.status.capture_id = capture_id(t.uid)
    t.status.start_time = t.now
    t.status.capture_deadline = t.now + timedelta(seconds=spec.capture.timeout_seconds)
    t.status.artifacts_uri = location.uri
    t.status.progress = "0/0"
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
        ostatus = read_status(other.get("status"))
        if ostatus.phase not in (Phase.CAPTURING, Phase.UPLOADING, Phase.RESOLVING):
            continue
        if (ometa.get("creationTimestamp") or "", ometa.get("name", "")) > mine:
            continue
        held = sorted(pods & {x.pod for x in ostatus.targets})
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


async def _target_pods(t: Tick, spec: ProfileSessionSpec) -> dict[str, dict[str, Any]]:
    """The pods the session's selectors find now, by name (the first selector that finds any, as at resolution)."""
    for selector in candidate_selectors(spec.targets):
        pods = await t.deps.kube.list_pods(t.namespace, selector)
        if pods:
            return {str((p.get("metadata") or {}).get("name", "")): p for p in pods}
    return {}


async def _check_containers(t: Tick, spec: ProfileSessionSpec) -> None:
    """A live target whose training container terminated ends as Crashed with the container's reason and exit code
    (pod_faults), and its sidecar's capture is aborted. The pods are read as often as each sidecar is asked."""
    live = [pod for pod, s in t.memo.states.items() if not s.state.terminal]
    last = t.memo.pods_checked
    if not live or (last is not None and (t.now - last).total_seconds() < poll_pacing.poll_gap(len(live))):
        return
    t.memo.pods_checked = t.now
    pods = await _target_pods(t, spec)
    t.memo.restarting = {pod for pod in live if pod_faults.sidecar_restarting(pods.get(pod) or {})}
    for pod in live:
        old = t.memo.states[pod]
        termination = pod_faults.training_termination(pods.get(pod) or {}, spec.targets.container)
        if termination is None or not pod_faults.crashed(old, termination, t.now):
            continue
        text = termination.describe()
        t.memo.states[pod] = _changed(old, TargetState.CRASHED, text, t.now)
        rank = f"rank {old.rank}" if old.rank is not None else "rank ?"
        t.event("RankCrashed", f"pod {pod} ({rank}): {text}", warning=True)
        if pod in t.memo.addresses and t.status.capture_id:
            # in the background: a sidecar waits a while for the dead hook to let go before it answers
            task = asyncio.create_task(t.deps.sidecars.abort(t.memo.addresses[pod], t.capture_id()))
            t.memo.aborting.add(task)
            task.add_done_callback(t.memo.aborting.discard)


def _wait_for_targets(t: Tick, spec: ProfileSessionSpec, resolution: Resolution) -> bool:
    """Whether to keep waiting (within targets.waitSeconds of the start) for pods to appear or become Ready."""
    started = t.status.start_time or t.now
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
    if t.status.message != message[:MAX_MESSAGE]:
        t.event("WaitingForTargets", message)
    t.status.phase = Phase.RESOLVING
    t.say(message)
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
        t.cond(ConditionType.TARGETS_RESOLVED, False, "NoTargets", "")  # why: the session's message
        t.fail("NoTargets", reason)
        return False
    holders = await _holders(t, {x.pod for x in resolution.targets})
    if holders:
        deadline = t.deadline()
        text = "; ".join(f"session {name} holds pod(s) {', '.join(pods_[:5])}" for name, pods_ in holders)
        if deadline is not None and t.now >= deadline:
            t.cond(ConditionType.TARGETS_RESOLVED, False, "PodsBusy", "")  # why: the session's message
            t.fail("PodsBusy", f"gave up waiting: {text}; one session profiles a pod at a time")
            return False
        t.cond(ConditionType.TARGETS_RESOLVED, False, "WaitingForSession", f"waiting: {text}")
        t.say(f"waiting: {text}")
        return False
    t.memo.addresses = {x.pod: x for x in resolution.targets}
    t.memo.states = {
        x.pod: TargetStatus(pod=x.pod, node=x.node, rank=x.rank, last_transition_time=t.now) for x in resolution.targets
    }
    t.memo.verified = set(t.memo.addresses)  # nobody has signalled them: this process starts them
    count = len(resolution.targets)
    t.cond(ConditionType.TARGETS_RESOLVED, True, "TargetsFound", f"{count} pod(s): {searched}")
    # The capture's deadline runs from here: time spent waiting for pods is not taken from it.
    t.status.capture_deadline = t.now + timedelta(seconds=spec.capture.timeout_seconds)
    _write_targets(t)
    t.move(Phase.CAPTURING, f"signalling {count} sidecar(s)")
    return True


def _write_targets(t: Tick) -> None:
    states = list(t.memo.states.values())
    t.status.counts = st.count_targets(states)
    t.status.progress = st.progress(t.status.counts)
    t.status.targets, t.status.targets_truncated = st.bounded(states)


async def _rebuild(t: Tick) -> None:
    """After a restart: addresses from the pods, states from the CR; unknown states are asked of the sidecars."""
    resolution = await _find_targets(t, t.spec())
    known = {x.pod: x for x in t.status.targets}
    truncated = t.status.targets_truncated
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


def _request(t: Tick, spec: ProfileSessionSpec) -> CaptureRequest:
    """The start request every target of this tick gets, but for its rank (set per target)."""
    return CaptureRequest(
        capture_id=t.capture_id(),
        session=SessionRef(namespace=t.namespace, name=t.name, uid=t.uid),
        options=CaptureOptions.from_spec(spec.capture),
        destination=StorageDestination(
            # recomputed from the accepted spec, never taken from status.artifactsUri
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
    kinds = [(a.uri, rank_file_of(a.uri)) for a in capture.artifacts]
    traces = [uri for uri, kind in kinds if kind is RankFile.TRACE]  # the pod's (first) rank's trace
    uploaded = traces or [a.uri for a in capture.artifacts]
    uri = uploaded[0] if uploaded else old.artifact_uri
    if any(kind is RankFile.SUMMARY for _, kind in kinds):
        t.memo.summarised.add(pod)
    t.memo.states[pod] = _changed(old, state, capture.message, t.now, artifact_uri=uri)
    t.memo.verified.add(pod)
    t.memo.get_failures.pop(pod, None)


async def _poll_one(t: Tick, bodies: StartBodies, pod: str) -> None:
    target = t.memo.addresses[pod]
    cid = t.capture_id()
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
        reply = await t.deps.sidecars.start(target, bodies.for_rank(target.rank))
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
    old = t.memo.states[pod]
    if pod in t.memo.restarting and not reply.http_status:  # unreachable while the kubelet starts it again
        t.memo.states[pod] = old.model_copy(update={"message": f"sidecar restarting: {reply.error}"[:1000]})
        return
    failures = t.memo.get_failures.get(pod, 0) + 1
    t.memo.get_failures[pod] = failures
    if failures >= MAX_GET_FAILURES or reply.http_status in (401, 404):
        t.memo.states[pod] = _changed(old, TargetState.FAILED, f"sidecar lost: {reply.error}", t.now)
    else:
        t.memo.states[pod] = old.model_copy(update={"message": f"status unknown: {reply.error}"[:1000]})


async def _capture(t: Tick) -> None:
    spec = t.spec()
    if not t.memo.addresses and not t.memo.states:
        await _rebuild(t)
    live = [pod for pod, s in t.memo.states.items() if not s.state.terminal and pod in t.memo.addresses]
    bodies = StartBodies(_request(t, spec))
    always = {pod for pod in live if pod not in t.memo.verified or t.memo.states[pod].state is TargetState.PENDING}
    due = poll_pacing.due_pods(live, always, t.memo.polled)
    for pod in due:
        t.memo.polled[pod] = t.now
    await bounded_each.each(due, lambda pod: _poll_one(t, bodies, pod), t.deps.config.signal_concurrency)
    await _check_containers(t, spec)
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
                await t.deps.sidecars.abort(t.memo.addresses[pod], t.capture_id())
    _write_targets(t)
    states = list(t.memo.states.values())
    if any(not s.state.terminal for s in states):
        phase = st.capture_phase(states)
        counts = st.count_targets(states)
        t.move(phase, f"{counts.captured}/{counts.total} captured, {counts.active + counts.pending} in progress")
        return
    await _all_terminal(t, spec, states)


async def _all_terminal(t: Tick, spec: ProfileSessionSpec, states: list[TargetStatus]) -> None:
    """Every target is terminal: analyse what was captured (or, after a crash, uploaded), or say why nothing is."""
    usable = st.evidence(states)
    summary = st.failure_summary(states)
    crash = st.crash_cause(states)
    if not usable:
        t.cond(ConditionType.CAPTURED, False, "RankCrashed" if crash else "NothingCaptured", "")  # why: the message
        if crash:
            t.fail("RankCrashed", f"{crash}; no rank uploaded anything to analyse: {summary}")
        else:
            t.fail("NothingCaptured", f"no target was captured: {summary}")
        return
    t.cond(
        ConditionType.CAPTURED,
        True,
        "AllTargetsTerminal",
        f"{len(usable)}/{len(states)} usable" + (f"; {summary}" if summary else ""),
    )
    if not spec.analysis.enabled:
        t.cond(ConditionType.COMPLETE, True, "AnalysisDisabled", "")
        t.cond(ConditionType.FAILED, False, "AnalysisDisabled", "")
        t.finished(st.final_phase(states), "traces captured; analysis disabled by the spec")
        return
    summarised = len({s.pod for s in usable} & t.memo.summarised)
    await _start_analysis(t, spec, len(usable), summarised)


async def _create_job(t: Tick, spec: ProfileSessionSpec, stage: AnalysisStage, shards: int) -> str:
    document = SessionDocument(namespace=t.namespace, name=t.name, uid=t.uid, capture_id=t.status.capture_id, spec=spec)
    job = build_job(document=document, config=t.deps.config, stage=stage, shards=shards)
    created = await t.deps.kube.create_job(t.namespace, job)
    prometheus_metrics.ANALYZER_JOBS.inc()
    name: str = created["metadata"]["name"]
    t.status.analyzer_job = name
    t.status.analysis_stage = stage
    return name


async def _start_analysis(t: Tick, spec: ProfileSessionSpec, ranks: int, summarised: int) -> None:
    shards = shard_count(spec, ranks, t.deps.config, summarised)
    name = await _create_job(t, spec, AnalysisStage.ALL if shards == 1 else AnalysisStage.MAP, shards)
    t.move(Phase.ANALYZING, f"analyzer Job {name} started" + (f" ({shards} shards)" if shards > 1 else ""))


async def _handed_back(t: Tick, job: dict[str, Any]) -> AnalysisOutcome | None:
    """The outcome the analyzer Job left in its pods' termination messages (None: it left none)."""
    meta = job.get("metadata") or {}
    pods = await t.deps.kube.list_pods(t.namespace, f"job-name={meta.get('name', '')}")
    return outcome_from_pods(pods, str(meta.get("uid", "")))


def _with_report_urls(t: Tick, spec: ProfileSessionSpec, outcome: AnalysisOutcome) -> AnalysisOutcome:
    """A report's URLs, recomputed from the session folder where the termination message had no room for them."""
    if not outcome.ok or (outcome.report_url and outcome.report_json_url):
        return outcome
    report = report_location(session_folder(spec, t.namespace, t.name, t.uid))
    return outcome.model_copy(
        update={
            "report_url": outcome.report_url or report.child(REPORT_HTML).uri,
            "report_json_url": outcome.report_json_url or report.child(REPORT_JSON).uri,
        }
    )


async def _analyze(t: Tick) -> None:
    spec = t.spec()
    name = t.status.analyzer_job or job_name(t.name, "analyze")
    stage = t.status.analysis_stage or AnalysisStage.ALL
    job = await t.deps.kube.get_job(t.namespace, name)
    state, message = job_outcome(job)
    if state == "running":
        return
    if stage is AnalysisStage.MAP and state == "succeeded":
        shards = int((job or {}).get("spec", {}).get("completions", 1))
        reduce_name = await _create_job(t, spec, AnalysisStage.REDUCE, shards)
        t.move(Phase.ANALYZING, f"per-rank summaries done; reduce Job {reduce_name} started")
        return
    handed = await _handed_back(t, job) if job is not None else None
    if handed is None:  # a Job that ended without a word (killed, over its deadline, no image): its own reason
        why = "it succeeded but handed back no outcome" if state == "succeeded" else message or "no reason given"
        failure = f"analyzer Job {name} {state}: {why}"
        handed = AnalysisOutcome(ok=False, message=failure)
    else:
        failure = f"analyzer Job {name} {state}" + (f" ({message})" if message else "") + f": {handed.message}"
    handed = _with_report_urls(t, spec, handed)
    apply_outcome(t.status, handed, now=t.now, generation=t.generation)
    if not handed.ok:
        crash = st.crash_cause(t.status.targets)
        t.fail("RankCrashed" if crash else "AnalysisFailed", f"{crash}; {failure}" if crash else failure)
        return
    note = outcome_disagreement(name, state, message)
    if note:
        t.event("AnalyzerJobFailed", note, warning=True)
    _complete(t, handed, note)


def _told_standstill(t: Tick, summary: ReportSummary) -> list[TargetStatus]:
    """The targets' states once the report named a standstill's culprits (summary.hungRanks): Hung or Desync for
    them, Waiting for the hung targets that wait for them; the counts follow. The targets' list as status holds it."""
    found = st.Standstill(
        culprits=frozenset(summary.hung_ranks), desync=summary.cause == "desync", waiting_in=summary.waiting_in
    )
    if t.memo.states:
        told = st.standstill_targets(list(t.memo.states.values()), found, t.now)
        t.memo.states = {s.pod: s for s in told}
        _write_targets(t)
    else:  # a restarted operator that has not rebuilt its memo: the status' own (possibly bounded) list
        t.status.targets = st.standstill_targets(t.status.targets, found, t.now)
        if not t.status.targets_truncated:
            t.status.counts = st.count_targets(t.status.targets)
    return list(t.status.targets)


def _captured_count_only(t: Tick) -> None:
    """The Captured condition without the targets not captured, once the session's message tells them."""
    captured = condition(t.status.conditions, ConditionType.CAPTURED)
    if captured is not None:
        count = captured.message.partition("; ")[0]  # "N/M usable", as _all_terminal wrote it
        t.cond(ConditionType.CAPTURED, captured.status is ConditionStatus.TRUE, captured.reason, count)


def _complete(t: Tick, handed: AnalysisOutcome, note: str = "") -> None:
    """The report is in: Succeeded, or PartiallySucceeded when some target was not captured."""
    states = t.status.targets
    phase = st.final_phase(states) if states else Phase.SUCCEEDED
    if t.status.targets_truncated:
        counts = t.status.counts
        phase = Phase.SUCCEEDED if counts.captured == counts.total else Phase.PARTIALLY_SUCCEEDED
    verdict = (handed.summary.verdict if handed.summary else "") or "report ready"
    summary = handed.summary
    standstill = summary is not None and summary.cause in st.STANDSTILL_CAUSES
    culprit = summary.slowest_rank if summary and standstill else None
    if summary is not None and culprit is not None:
        states = _told_standstill(t, summary)
        crashed = any(x.rank == culprit and x.state is TargetState.CRASHED for x in states)
        role = "crashed" if crashed else "desynced" if summary.cause == "desync" else "hung"
        t.status.progress = st.progress(t.status.counts, culprit, role)
    failures = st.failure_summary(states)
    # the verdict (and `note`, how the Job's own outcome differs from the report's) is the status message's, told
    # once; the Complete condition's reason names a note
    t.cond(ConditionType.COMPLETE, True, "AnalyzerJobFailed" if note else phase.value, "")
    t.cond(ConditionType.FAILED, False, phase.value, "")
    message = verdict + (f" (not captured: {failures})" if phase is Phase.PARTIALLY_SUCCEEDED else "")
    if failures and phase is Phase.PARTIALLY_SUCCEEDED:
        _captured_count_only(t)
    if handed.regressed is not None:
        message = st.with_gate(message, summary, handed.regressed.reason)
    t.finished(phase, f"{note}; {message}" if note else message)


def _changed_fields(t: Tick) -> list[str]:
    """Top-level spec fields that differ from the accepted spec (the CRD freezes most; this names what got by)."""
    try:
        current = effective_spec(ProfileSessionSpec.model_validate(t.body.get("spec") or {}), t.deps.config).wire()
        accepted = t.spec().wire()
    except (ValidationError, ValueError):
        return []
    return sorted(k for k in set(current) | set(accepted) if current.get(k) != accepted.get(k))


def _spec_drift(t: Tick) -> None:
    observed = t.status.observed_generation
    if observed is not None and t.generation > observed and t.phase is not Phase.PENDING:
        fields = ", ".join(f"spec.{name}" for name in _changed_fields(t)) or "the spec"
        message = (
            f"{fields} changed after the session started (generation {t.generation}); the change is ignored and "
            f"the session runs with the spec of generation {observed}. Create a new ProfileSession instead."
        )
        accepted = condition(t.status.conditions, ConditionType.ACCEPTED)
        if not accepted or accepted.reason != "SpecChangeIgnored" or accepted.message != message:
            t.cond(ConditionType.ACCEPTED, False, "SpecChangeIgnored", message)
            t.event("SpecChangeIgnored", message, warning=True)


async def advance(body: dict[str, Any], memo: Memo, deps: Deps, now: datetime | None = None) -> Outcome:
    """Move the session as far as it can go now; the caller writes `Outcome.status` to the status subresource."""
    t = Tick(body, memo, deps, now or st.utcnow())
    await _advance(t)
    return t.finish()


async def _advance(t: Tick) -> None:
    if t.phase.terminal:
        return
    _spec_drift(t)
    if t.phase is Phase.PENDING and not _accept(t):
        return
    if t.phase is Phase.RESOLVING and not await _resolve(t):
        return
    if t.phase in (Phase.CAPTURING, Phase.UPLOADING):
        await _capture(t)
    elif t.phase is Phase.ANALYZING:
        await _analyze(t)


async def abort_all(body: dict[str, Any], memo: Memo, deps: Deps) -> list[str]:
    """On delete: abort every target that is not terminal. Returns the pods that were sent an abort."""
    t = Tick(body, memo, deps, st.utcnow())
    if t.phase not in (Phase.CAPTURING, Phase.UPLOADING) or not t.status.capture_id:
        return []
    if not memo.addresses:
        await _rebuild(t)
    pods = [pod for pod, s in memo.states.items() if not s.state.terminal and pod in memo.addresses]
    await asyncio.gather(*(deps.sidecars.abort(memo.addresses[p], t.capture_id()) for p in pods))
    return pods
