"""Target resolution: which pods a session profiles and at which rank. Pure functions over pod dicts.

Job kinds: a batch Job (pods by job-name label, rank = completion index), a Kubeflow PyTorchJob (replica type and
index), a JobSet (rank = the replicated job's first rank + Job index x pods per Job + completion index, read from
the JobSet's spec), and a Kubeflow Trainer v2 TrainJob, which runs through a JobSet of the same name: only its
trainer replicated jobs (label `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, or the one named `node`) are
targets, so dataset and model initializer pods never are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stepscope_contract.constants import DEFAULT_SIDECAR_PORT, RANK_ANNOTATION, SIDECAR_PORT_ANNOTATION
from stepscope_contract.session import JobKind, LabelSelector, TargetSpec

PYTORCHJOB_NAME = "training.kubeflow.org/job-name"
PYTORCHJOB_REPLICA_TYPE = "training.kubeflow.org/replica-type"
PYTORCHJOB_REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
TRAINJOB_ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINJOB_TRAINER_STEP = "trainer"
TRAINJOB_NODE_JOB = "node"
JOBSET_API = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
TRAINJOB_API = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
JOB_NAME = "batch.kubernetes.io/job-name"
JOB_NAME_LEGACY = "job-name"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

Pod = Mapping[str, Any]


@dataclass(frozen=True)
class Target:
    pod: str
    uid: str
    node: str | None
    rank: int | None
    ip: str
    port: int
    namespace: str = "default"  # the sidecar accepts only its namespace's token (stepscope_contract.tokens)

    @property
    def base_url(self) -> str:
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"http://{host}:{self.port}"


@dataclass(frozen=True)
class Resolution:
    targets: tuple[Target, ...]
    reason: str = ""  # why nothing (or fewer than asked) was found; empty when all is well
    searched: str = ""
    starting: int = 0  # matching pods still on their way to Running and Ready (worth waiting for)


@dataclass(frozen=True)
class JobSetLayout:
    """Where a JobSet's ranks are: replicated job name -> (its first rank, pods per Job). Replicated jobs that are
    not listed (a TrainJob's initializers) hold no targets."""

    first_ranks: Mapping[str, tuple[int, int]]

    def rank(self, pod: Pod) -> int | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        entry = self.first_ranks.get(str(labels.get(JOBSET_REPLICATED_JOB, "")))
        if entry is None:
            return None
        first, per_job = entry
        job_index = _int(labels.get(JOBSET_JOB_INDEX)) or 0
        completion = _int((meta.get("annotations") or {}).get(JOB_COMPLETION_INDEX, labels.get(JOB_COMPLETION_INDEX)))
        return first + job_index * per_job + (completion or 0)

    def holds(self, pod: Pod) -> bool:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return str(labels.get(JOBSET_REPLICATED_JOB, "")) in self.first_ranks


def _is_trainer(replicated_job: Mapping[str, Any]) -> bool:
    labels = ((replicated_job.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(TRAINJOB_ANCESTOR) == TRAINJOB_TRAINER_STEP


def jobset_layout(jobset: Mapping[str, Any], trainer_only: bool = False) -> JobSetLayout:
    """Ranks in the order of the JobSet's replicated jobs; `trainer_only` keeps a TrainJob's trainer steps (labelled,
    else the replicated job named `node`, else every one without an ancestor label)."""
    replicated = list(((jobset.get("spec") or {}).get("replicatedJobs")) or [])
    if trainer_only:
        labelled = [rj for rj in replicated if _is_trainer(rj)]
        named = [rj for rj in replicated if rj.get("name") == TRAINJOB_NODE_JOB]
        unlabelled = [
            rj
            for rj in replicated
            if TRAINJOB_ANCESTOR not in (((rj.get("template") or {}).get("metadata") or {}).get("labels") or {})
        ]
        replicated = labelled or named or unlabelled
    first_ranks: dict[str, tuple[int, int]] = {}
    first = 0
    for rj in replicated:
        job_spec = ((rj.get("template") or {}).get("spec")) or {}
        per_job = _int(job_spec.get("parallelism")) or _int(job_spec.get("completions")) or 1
        replicas = _int(rj.get("replicas"))
        first_ranks[str(rj.get("name", ""))] = (first, per_job)
        first += (1 if replicas is None else replicas) * per_job
    return JobSetLayout(first_ranks)


def selector_string(selector: LabelSelector) -> str:
    """A LabelSelector as the string form list/watch take (`a=b,c in (d,e),!f`)."""
    parts = [f"{k}={v}" for k, v in sorted((selector.match_labels or {}).items())]
    for req in selector.match_expressions or []:
        if req.operator == "In":
            parts.append(f"{req.key} in ({','.join(req.values)})")
        elif req.operator == "NotIn":
            parts.append(f"{req.key} notin ({','.join(req.values)})")
        elif req.operator == "Exists":
            parts.append(req.key)
        else:
            parts.append(f"!{req.key}")
    return ",".join(parts)


def candidate_selectors(spec: TargetSpec) -> list[str]:
    """Label selectors to try in order; the first that finds pods wins."""
    if spec.selector is not None:
        return [selector_string(spec.selector)]
    assert spec.job_ref is not None
    name = spec.job_ref.name
    if spec.job_ref.kind is JobKind.PYTORCH_JOB:
        return [f"{PYTORCHJOB_NAME}={name}"]
    if spec.job_ref.kind in (JobKind.JOB_SET, JobKind.TRAIN_JOB):  # a TrainJob's JobSet has the TrainJob's name
        return [f"{JOBSET_NAME}={name}"]
    return [f"{JOB_NAME}={name}", f"{JOB_NAME_LEGACY}={name}"]


def is_running_ready(pod: Pod) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _int(value: Any) -> int | None:
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else None


def _container(pod: Pod, name: str | None) -> Mapping[str, Any] | None:
    containers = (pod.get("spec") or {}).get("containers") or []
    if name is None:
        return containers[0] if containers else None
    return next((c for c in containers if c.get("name") == name), None)


def pod_rank(
    pod: Pod, container: str | None = None, pytorchjob_has_master: bool = False, layout: JobSetLayout | None = None
) -> int | None:
    """Rank of a pod: annotation stepscope.dev/rank, the container's literal RANK env, its place in the JobSet's
    layout, the PyTorchJob replica type/index, the JobSet global index, or the Job completion index — in that
    order."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    explicit = _int(annotations.get(RANK_ANNOTATION))
    if explicit is not None:
        return explicit
    chosen = _container(pod, container)
    for env in (chosen or {}).get("env") or []:
        if env.get("name") == "RANK" and "value" in env:
            value = _int(env.get("value"))
            if value is not None:
                return value
    if layout is not None and layout.holds(pod):
        return layout.rank(pod)
    replica_type = str(labels.get(PYTORCHJOB_REPLICA_TYPE, "")).lower()
    replica_index = _int(labels.get(PYTORCHJOB_REPLICA_INDEX))
    if replica_type and replica_index is not None:
        if replica_type == "master":
            return replica_index
        if replica_type == "worker":
            return replica_index + (1 if pytorchjob_has_master else 0)
    for key in (JOBSET_GLOBAL_INDEX, JOB_COMPLETION_INDEX):
        value = _int(annotations.get(key, labels.get(key)))
        if value is not None:
            return value
    return None


def sidecar_port(pod: Pod) -> int:
    value = _int(((pod.get("metadata") or {}).get("annotations") or {}).get(SIDECAR_PORT_ANNOTATION))
    return value if value is not None and 0 < value < 65536 else DEFAULT_SIDECAR_PORT


def is_starting(pod: Pod) -> bool:
    """A pod on its way to Running and Ready (not finished, not being deleted)."""
    phase = (pod.get("status") or {}).get("phase", "Pending")
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    return not deleting and phase in ("Pending", "Running") and not is_running_ready(pod)


def resolve_targets(
    pods: Iterable[Pod], spec: TargetSpec, searched: str, layout: JobSetLayout | None = None
) -> Resolution:
    """Pick the Running+Ready pods, give each its rank, apply the rank subset and maxTargets (lowest ranks first).
    With a JobSet layout, pods of replicated jobs outside it (a TrainJob's initializers) are no targets."""
    all_pods = [p for p in pods if layout is None or layout.holds(p)]
    ready = [p for p in all_pods if is_running_ready(p) and (p.get("status") or {}).get("podIP")]
    starting = sum(1 for p in all_pods if is_starting(p))
    has_master = any(
        str(((p.get("metadata") or {}).get("labels") or {}).get(PYTORCHJOB_REPLICA_TYPE, "")).lower() == "master"
        for p in all_pods
    )
    targets = []
    for pod in ready:
        meta = pod.get("metadata") or {}
        targets.append(
            Target(
                pod=str(meta.get("name")),
                uid=str(meta.get("uid", "")),
                node=(pod.get("spec") or {}).get("nodeName"),
                rank=pod_rank(pod, spec.container, has_master, layout),
                ip=str((pod.get("status") or {}).get("podIP")),
                port=sidecar_port(pod),
                namespace=str(meta.get("namespace") or "default"),
            )
        )
    subset = spec.rank_set()
    if subset is not None:
        targets = [t for t in targets if t.rank is not None and t.rank in subset]
    targets.sort(key=lambda t: (t.rank is None, t.rank if t.rank is not None else 0, t.pod))
    chosen = tuple(targets[: spec.max_targets])
    if chosen:
        return Resolution(chosen, "", searched, starting)
    if not all_pods:
        reason = f"no pod matches {searched}"
    elif not ready:
        reason = f"{len(all_pods)} pod(s) match {searched} but none is Running and Ready with an IP"
    else:
        reason = f"{len(ready)} Running pod(s) match {searched} but none has a rank in the subset '{spec.ranks}'"
    return Resolution((), reason, searched, starting)


def capture_id(session_uid: str, generation: int = 1) -> str:
    """Deterministic per session: a restarted operator re-sends the same id, and sidecars treat it idempotently."""
    digest = hashlib.sha256(f"{session_uid}/{generation}".encode()).hexdigest()[:16]
    return f"cap-{digest}"


def overlapping_pods(mine: Sequence[str], theirs: Sequence[str]) -> list[str]:
    return sorted(set(mine) & set(theirs))
