"""Deleting a session's artifacts when its accepted spec asks for it (storage.deleteOnSessionDelete). Pure.

Nothing here trusts `status.artifactsUri` (status is display; only the operator writes it, but a user with rights on
the status subresource could point it anywhere). The folder is recomputed from the accepted (frozen) spec and the
object's namespace, name and uid, so it is always `<storage.uri>/<namespace>/<name>-<uid8>`.

The operator holds no storage keys and no right to read Secrets. It starts a short-lived cleanup Job in the session's
namespace, under the analyzer's ServiceAccount, with the session's own `credentialsSecret` as `secretKeyRef` env; the
Job (`stepscope analyzer-job --mode delete --session-json DOC`) gets the session as accepted (frozen spec, namespace,
name, uid) and recomputes the folder from it itself, so it can only delete `<storage.uri>/<namespace>/<name>-<uid8>`
and the session's own sessions-index entry; it needs no Kubernetes API. The Job is not owner-referenced to the session
(it would be collected with it) and removes itself after `ttlSecondsAfterFinished`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stepscope_contract.analysis_documents import SessionDocument
from stepscope_contract.constants import SESSION_LABEL
from stepscope_contract.session import ProfileSessionSpec
from stepscope_contract.session_folder import accepted_spec, session_folder
from stepscope_contract.storage import Scheme, StorageUriError, sanitize_segment
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.session.analyzer_jobs import analyzer_pod_job, job_name, storage_env

CLEANUP_DEADLINE_SECONDS = 600
ENV_ALLOW_FILE_DELETION = "STEPSCOPE_ALLOW_FILE_DELETION"


@dataclass(frozen=True)
class Notice:
    warning: bool
    reason: str
    message: str


@dataclass
class DeletionPlan:
    """What to do on delete: a cleanup Job to run (or none), and what to tell the user about it."""

    job: dict[str, Any] | None = None
    location: str = ""
    notices: list[Notice] = field(default_factory=list)


def cleanup_job_name(session: str, uid: str) -> str:
    uid8 = "".join(c for c in uid.lower() if c.isalnum())[:8] or "nouid"
    return job_name(session, f"cleanup-{uid8}")


def plan_deletion(body: dict[str, Any], config: OperatorConfig) -> DeletionPlan:
    """The cleanup of a session being deleted, decided from its metadata and accepted spec only."""
    meta = body.get("metadata") or {}
    namespace, name, uid = str(meta.get("namespace", "default")), str(meta.get("name", "")), str(meta.get("uid", ""))
    spec = accepted_spec(meta)
    plan = DeletionPlan()
    if spec is None or not spec.storage.delete_on_session_delete:
        return plan  # never accepted (nothing was written), or the artifacts are kept
    try:
        location = session_folder(spec, namespace, name, uid)
    except StorageUriError as exc:
        plan.notices.append(Notice(True, "ArtifactsNotDeleted", f"the accepted storage URI is unusable: {exc}"))
        return plan
    plan.location = location.uri
    claimed = (body.get("status") or {}).get("artifactsUri")
    if claimed and claimed != location.uri:
        plan.notices.append(
            Notice(
                True,
                "ArtifactsUriIgnored",
                f"status.artifactsUri {str(claimed)[:300]!r} is not this session's folder; only {location.uri} "
                "is deleted",
            )
        )
    if location.scheme is Scheme.FILE and not config.local_mode:
        plan.notices.append(
            Notice(True, "ArtifactsNotDeleted", f"{location.uri}: file:// artifacts are deleted only in local mode")
        )
        return plan
    plan.job = build_cleanup_job(namespace=namespace, name=name, uid=uid, spec=spec, config=config)
    return plan


def build_cleanup_job(
    *, namespace: str, name: str, uid: str, spec: ProfileSessionSpec, config: OperatorConfig
) -> dict[str, Any]:
    labels = {
        SESSION_LABEL: sanitize_segment(name)[:63],
        "app.kubernetes.io/name": "stepscope-cleanup",
        "app.kubernetes.io/part-of": "stepscope",
    }
    env = storage_env(spec, config)  # the session's own keys; the operator never sees them
    if config.local_mode:
        env.append({"name": ENV_ALLOW_FILE_DELETION, "value": "true"})
    return analyzer_pod_job(
        name=cleanup_job_name(name, uid),
        namespace=namespace,
        labels=labels,
        container={
            "name": "cleanup",
            "args": [
                "--session-json",
                SessionDocument(namespace=namespace, name=name, uid=uid, spec=spec).to_json(),
                "--mode",
                "delete",
            ],
            "env": env,
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"cpu": "500m", "memory": "256Mi"},
            },
        },
        job_spec={
            "backoffLimit": 2,
            "activeDeadlineSeconds": CLEANUP_DEADLINE_SECONDS,
            "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        },
        config=config,
    )
