"""The analyzer Jobs of a session (and the pod shape the cleanup Job shares): pure builders of batch/v1 Jobs, and
what a finished Job handed back.

A Job gets the session as the operator accepted it (stepscope_contract.analysis_documents.SessionDocument) in its
arguments, and needs no Kubernetes API: it writes the report into the session folder and hands its outcome back as
its container's termination message (`TERMINATION_MESSAGE_PATH`), which the operator reads from the Job's pods
(`outcome_from_pods`) and writes into the session's status."""

from __future__ import annotations

from typing import Any

from stepscope_contract.analysis_documents import AnalysisOutcome, SessionDocument
from stepscope_contract.constants import API_VERSION, KIND, SESSION_LABEL
from stepscope_contract.session import AnalysisStage, ProfileSessionSpec
from stepscope_contract.storage import sanitize_segment
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_storage.credentials import secret_env

MAX_NAME = 63
TERMINATION_MESSAGE_PATH = "/dev/termination-log"


SCRATCH_SIZE = "1Gi"
"""the analyzer pod's /tmp: report.json on its way to storage (max_report_json_bytes, 512 MiB) and the analysis'
small files; summaries read again come from storage, never from the pod's disk"""


def job_name(session: str, suffix: str) -> str:
    base = sanitize_segment(session).lower().replace("_", "-").replace(".", "-")
    room = MAX_NAME - len(suffix) - 1
    return f"{base[:room].rstrip('-')}-{suffix}"


def shard_count(spec: ProfileSessionSpec, ranks: int, config: OperatorConfig, summarised: int = 0) -> int:
    """1 = a single Job does map and reduce; more = an Indexed map Job then a reduce Job. Only the ranks whose traces
    the analysis must parse count against the threshold: a rank its sidecar summarised (`summarised` of them) costs
    the Job a read of kilobytes."""
    if spec.analysis.shards:
        return max(1, min(spec.analysis.shards, ranks))
    to_parse = max(0, ranks - summarised)
    if to_parse <= config.shard_threshold:
        return 1
    return min(32, -(-to_parse // config.shard_threshold))


def storage_env(spec: ProfileSessionSpec, config: OperatorConfig) -> list[dict[str, Any]]:
    """The environment of a Job that reaches the session's storage: the session's own credentials Secret (as
    secretKeyRef; the operator never sees the keys), then the operator's extra env for analyzer Jobs."""
    env: list[dict[str, Any]] = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    secret = spec.storage.credentials_secret
    if secret is not None:
        env += secret_env(secret.name, secret.access_key_id_key, secret.secret_access_key_key)
    env.extend({"name": k, "value": v} for k, v in sorted(config.extra_env.items()))
    return env


def analyzer_pod_job(
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    container: dict[str, Any],
    job_spec: dict[str, Any],
    config: OperatorConfig,
) -> dict[str, Any]:
    """A batch/v1 Job of one container from the analyzer image, under the analyzer ServiceAccount, non-root, with a
    read-only root filesystem and a writable /tmp. `container` gives name, args, env and resources; `job_spec` the
    Job's own fields (deadlines, TTL, completions)."""
    pod_container = {
        "image": config.analyzer_image,
        "command": list(config.analyzer_command),
        **container,
        # what the Job hands back to the operator (outcome_from_pods); the kubelet keeps up to 4,096 bytes of it
        "terminationMessagePath": TERMINATION_MESSAGE_PATH,
        "terminationMessagePolicy": "File",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": config.analyzer_service_account,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "runAsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [pod_container],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": SCRATCH_SIZE}}],
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {**job_spec, "template": template},
    }


STAGE_MODES: dict[AnalysisStage, tuple[str, str]] = {
    AnalysisStage.ALL: ("all", "analyze"),
    AnalysisStage.MAP: ("map", "analyze-map"),
    AnalysisStage.REDUCE: ("reduce", "analyze-reduce"),
}
"""stage -> (the analyzer's --mode, the Job name's suffix)"""


def job_args(document: SessionDocument, mode: str) -> list[str]:
    """The analyzer's command line: the accepted session, the mode, and where its outcome goes."""
    return ["--session-json", document.to_json(), "--mode", mode, "--outcome-file", TERMINATION_MESSAGE_PATH]


def build_job(
    *,
    document: SessionDocument,
    config: OperatorConfig,
    stage: AnalysisStage,
    shards: int,
) -> dict[str, Any]:
    """One analyzer Job: stage All (single Job), Map (Indexed, `shards` completions) or Reduce."""
    session, namespace, uid, spec = document.name, document.namespace, document.uid, document.spec
    mode, suffix = STAGE_MODES[stage]
    args = job_args(document, mode)
    if stage is not AnalysisStage.ALL:
        args += ["--shards", str(shards)]
    resources = {"cpu": spec.analysis.resources.cpu, "memory": spec.analysis.resources.memory}
    labels = {
        SESSION_LABEL: sanitize_segment(session)[:63],
        "app.kubernetes.io/name": "stepscope-analyzer",
        "app.kubernetes.io/part-of": "stepscope",
    }
    job_spec: dict[str, Any] = {
        "backoffLimit": 1,
        "activeDeadlineSeconds": config.analyzer_deadline_seconds,
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
    }
    if stage is AnalysisStage.MAP:
        job_spec.update({"completionMode": "Indexed", "completions": shards, "parallelism": shards})
    job = analyzer_pod_job(
        name=job_name(session, suffix),
        namespace=namespace,
        labels=labels,
        container={
            "name": "analyzer",
            "args": args,
            "env": storage_env(spec, config),
            "resources": {"requests": resources, "limits": resources},
        },
        job_spec=job_spec,
        config=config,
    )
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": API_VERSION, "kind": KIND, "name": session, "uid": uid, "controller": True,
         "blockOwnerDeletion": True}
    ]  # fmt: skip
    return job


def job_outcome(job: dict[str, Any] | None) -> tuple[str, str]:
    """('running'|'succeeded'|'failed'|'missing', message) from a Job's status."""
    if job is None:
        return "missing", "the analyzer Job is gone"
    status = job.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") in ("Complete", "SuccessCriteriaMet"):
            return "succeeded", cond.get("message", "")
        if cond.get("type") in ("Failed", "FailureTarget"):
            return "failed", f"{cond.get('reason', 'Failed')}: {cond.get('message', '')}".strip(": ")
    completions = (job.get("spec") or {}).get("completions", 1) or 1
    if int(status.get("succeeded", 0) or 0) >= int(completions):
        return "succeeded", ""
    return "running", ""


def outcome_disagreement(name: str, state: str, message: str) -> str:
    """How the Job's own outcome differs from a report it handed back ('' when they agree): a Job that ended
    failed although an attempt of it wrote the report (a later attempt killed, over its deadline) is said so, for
    the session's message and Complete condition, since the report is true and the Job's status is too."""
    if state != "failed":
        return ""
    why = f" ({message})" if message else ""
    return f"analyzer Job {name} failed{why} after an earlier attempt of it wrote this report"


def _terminated(pod: dict[str, Any]) -> list[dict[str, Any]]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return [t for s in statuses if isinstance(t := (s.get("state") or {}).get("terminated"), dict)]


def _owned_by(pod: dict[str, Any], job_uid: str) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "Job" and r.get("uid") == job_uid for r in refs)


def outcome_from_pods(pods: list[dict[str, Any]], job_uid: str) -> AnalysisOutcome | None:
    """The outcome the latest-finished container of the Job's pods (those it owns: `job_uid`) left as its termination
    message (None: none left one that reads as an outcome: killed, over its deadline, or an older analyzer)."""
    found: list[tuple[str, AnalysisOutcome]] = []
    for pod in (p for p in pods if _owned_by(p, job_uid)):
        for terminated in _terminated(pod):
            outcome = AnalysisOutcome.from_json(str(terminated.get("message") or ""))
            if outcome is not None:
                found.append((str(terminated.get("finishedAt") or ""), outcome))
    return max(found, key=lambda f: f[0])[1] if found else None
