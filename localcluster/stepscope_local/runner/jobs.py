"""The batch/v1 Job controller's decisions as pure functions: which pods to create or delete, and the status."""

from __future__ import annotations

import copy
import datetime as dt
import secrets
from dataclasses import dataclass, field
from typing import Any

from stepscope_contract.ranks import format_rank_set

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
TERMINAL = ("Succeeded", "Failed")


@dataclass
class JobPlan:
    create: list[int | None] = field(default_factory=list)  # completion indexes (None when not Indexed)
    delete: list[str] = field(default_factory=list)  # names of pods to delete
    status: dict[str, Any] = field(default_factory=dict)
    expired: bool = False  # ttlSecondsAfterFinished has passed: delete the Job


def _ts(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(ts: str | None) -> dt.datetime | None:
    if not ts:
        return None
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))


def pod_index(pod: dict[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_KEY)
    return int(value) if value is not None and str(value).isdigit() else None


def compress_indexes(indexes: set[int]) -> str:
    """`0-2,4` as in status.completedIndexes: the same compact form as a rank subset."""
    return format_rank_set(indexes)


def _condition(kind: str, reason: str, message: str, now: dt.datetime) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": _ts(now),
        "lastTransitionTime": _ts(now),
    }


def _finished(status: dict[str, Any]) -> str | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def plan_job(job: dict[str, Any], pods: list[dict[str, Any]], now: dt.datetime) -> JobPlan:
    spec = job.get("spec") or {}
    old = job.get("status") or {}
    indexed = spec.get("completionMode") == "Indexed"
    parallelism = int(spec.get("parallelism", 1))
    completions = int(spec.get("completions") or 1)
    backoff = int(spec.get("backoffLimit", 6))
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    active = [p for p in live if (p.get("status") or {}).get("phase") not in TERMINAL]
    succeeded_pods = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
    failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
    done_indexes = {i for p in succeeded_pods if (i := pod_index(p)) is not None}
    succeeded = len(done_indexes) if indexed else len(succeeded_pods)
    start = _parse(old.get("startTime")) or now
    plan = JobPlan()
    conditions = list(old.get("conditions") or [])
    finished = _finished(old)
    completion_time = old.get("completionTime")
    if finished is None:
        deadline = spec.get("activeDeadlineSeconds")
        if failed > backoff:
            conditions.append(
                _condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now)
            )
            plan.delete = [p["metadata"]["name"] for p in active]
        elif deadline is not None and (now - start).total_seconds() >= float(deadline):
            conditions.append(
                _condition("Failed", "DeadlineExceeded", "Job was active longer than specified deadline", now)
            )
            plan.delete = [p["metadata"]["name"] for p in active]
        elif succeeded >= completions:
            conditions.append(
                _condition("Complete", "CompletionsReached", "Reached expected number of succeeded pods", now)
            )
            completion_time = _ts(now)
            plan.delete = [p["metadata"]["name"] for p in active]
        else:
            slots = max(0, parallelism - len(active))
            if indexed:
                busy = {pod_index(p) for p in active}
                wanted: list[int | None] = [i for i in range(completions) if i not in done_indexes and i not in busy]
                plan.create = wanted[:slots]
            else:
                plan.create = [None] * max(0, min(slots, completions - succeeded - len(active)))
    elif finished and spec.get("ttlSecondsAfterFinished") is not None:
        ended = _parse(old.get("completionTime")) or _parse(conditions[-1].get("lastTransitionTime")) or now
        plan.expired = (now - ended).total_seconds() >= float(spec["ttlSecondsAfterFinished"])
    now_finished = _finished({"conditions": conditions})
    status: dict[str, Any] = {
        "startTime": _ts(start),
        "active": 0 if now_finished else len(active) + len(plan.create),
        "ready": 0 if now_finished else sum(1 for p in active if _ready(p)),
        "succeeded": succeeded,
        "failed": failed,
        "conditions": conditions,
    }
    if indexed:
        status["completedIndexes"] = compress_indexes(done_indexes)
    if completion_time:
        status["completionTime"] = completion_time
    plan.status = status
    return plan


def pod_for(job: dict[str, Any], index: int | None) -> dict[str, Any]:
    """The pod the Job controller creates for one completion (labels, index annotation and env, owner)."""
    meta = job["metadata"]
    uid, name = meta["uid"], meta["name"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels.update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
        }
    )
    annotations = dict(tmeta.get("annotations") or {})
    spec = template.get("spec") or {}
    suffix = secrets.token_hex(3)[:5]
    pod_name = f"{name}-{suffix}"
    if index is not None:
        annotations[INDEX_KEY] = str(index)
        labels[INDEX_KEY] = str(index)
        pod_name = f"{name}-{index}-{suffix}"
        spec.setdefault("hostname", f"{name}-{index}")
        env_var = {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_KEY}']"}},
        }
        for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            container["env"] = [*(container.get("env") or []), env_var]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
