"""The analyzer Job(s) for a session: pure builders of batch/v1 Job objects."""

from __future__ import annotations

from typing import Any

from stepscope_contract.constants import API_VERSION, KIND, SESSION_LABEL
from stepscope_contract.session import ProfileSessionSpec
from stepscope_contract.storage import sanitize_segment
from stepscope_operator.config import OperatorConfig

MAX_NAME = 63


def job_name(session: str, suffix: str) -> str:
    base = sanitize_segment(session).lower().replace("_", "-").replace(".", "-")
    room = MAX_NAME - len(suffix) - 1
    return f"{base[:room].rstrip('-')}-{suffix}"


def shard_count(spec: ProfileSessionSpec, ranks: int, config: OperatorConfig) -> int:
    """1 = a single Job does map and reduce; more = an Indexed map Job then a reduce Job."""
    if spec.analysis.shards:
        return max(1, min(spec.analysis.shards, ranks))
    if ranks <= config.shard_threshold:
        return 1
    return min(32, -(-ranks // config.shard_threshold))


def _env(spec: ProfileSessionSpec, config: OperatorConfig) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    secret = spec.storage.credentials_secret
    if secret is not None:
        for var, key in (
            ("AWS_ACCESS_KEY_ID", secret.access_key_id_key),
            ("AWS_SECRET_ACCESS_KEY", secret.secret_access_key_key),
        ):
            env.append({"name": var, "valueFrom": {"secretKeyRef": {"name": secret.name, "key": key}}})
    env.extend({"name": k, "value": v} for k, v in sorted(config.extra_env.items()))
    return env


def build_job(
    *,
    session: str,
    namespace: str,
    uid: str,
    spec: ProfileSessionSpec,
    config: OperatorConfig,
    mode: str,
    shards: int,
) -> dict[str, Any]:
    """One analyzer Job: mode 'all' (single Job), 'map' (Indexed, `shards` completions) or 'reduce'."""
    suffix = {"all": "analyze", "map": "analyze-map", "reduce": "analyze-reduce"}[mode]
    name = job_name(session, suffix)
    args = ["--namespace", namespace, "--name", session, "--mode", mode]
    if mode != "all":
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
        "template": {
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
                "containers": [
                    {
                        "name": "analyzer",
                        "image": config.analyzer_image,
                        "command": list(config.analyzer_command),
                        "args": args,
                        "env": _env(spec, config),
                        "resources": {"requests": resources, "limits": resources},
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }
                ],
                "volumes": [{"name": "tmp", "emptyDir": {}}],
            },
        },
    }
    if mode == "map":
        job_spec.update({"completionMode": "Indexed", "completions": shards, "parallelism": shards})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": session,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": job_spec,
    }


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
