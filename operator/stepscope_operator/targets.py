"""Target resolution: which pods a session profiles and at which rank. Pure functions over pod dicts."""

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
    if spec.job_ref.kind is JobKind.JOB_SET:
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


def pod_rank(pod: Pod, container: str | None = None, pytorchjob_has_master: bool = False) -> int | None:
    """Rank of a pod: annotation stepscope.dev/rank, the container's literal RANK env, the PyTorchJob replica
    type/index, the JobSet global index, or the Job completion index — in that order."""
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


def resolve_targets(pods: Iterable[Pod], spec: TargetSpec, searched: str) -> Resolution:
    """Pick the Running+Ready pods, give each its rank, apply the rank subset and maxTargets (lowest ranks first)."""
    all_pods = list(pods)
    ready = [p for p in all_pods if is_running_ready(p) and (p.get("status") or {}).get("podIP")]
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
                rank=pod_rank(pod, spec.container, has_master),
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
        return Resolution(chosen, "", searched)
    if not all_pods:
        reason = f"no pod matches {searched}"
    elif not ready:
        reason = f"{len(all_pods)} pod(s) match {searched} but none is Running and Ready with an IP"
    else:
        reason = f"{len(ready)} Running pod(s) match {searched} but none has a rank in the subset '{spec.ranks}'"
    return Resolution((), reason, searched)


def capture_id(session_uid: str, generation: int = 1) -> str:
    """Deterministic per session: a restarted operator re-sends the same id, and sidecars treat it idempotently."""
    digest = hashlib.sha256(f"{session_uid}/{generation}".encode()).hexdigest()[:16]
    return f"cap-{digest}"


def overlapping_pods(mine: Sequence[str], theirs: Sequence[str]) -> list[str]:
    return sorted(set(mine) & set(theirs))
