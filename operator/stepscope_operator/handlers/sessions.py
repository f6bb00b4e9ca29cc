"""kopf handlers: thin wrappers over `lifecycle`. Handler ids are explicit so that progress survives renames."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import kopf

from stepscope_contract.constants import FINALIZER, GROUP, PLURAL, VERSION
from stepscope_contract.session import Phase
from stepscope_operator.runtime import metrics as prometheus_metrics
from stepscope_operator.runtime.config import OperatorConfig, retry_after
from stepscope_operator.runtime.kube import Kube
from stepscope_operator.session import artifacts
from stepscope_operator.session.analyzer_jobs import job_outcome
from stepscope_operator.session.lifecycle import Deps, Memo, abort_all, advance
from stepscope_operator.sidecars.client import SidecarClient

RESOURCE = (GROUP, VERSION, PLURAL)
TERMINAL = {p.value for p in Phase if p.terminal}
CONFIG = OperatorConfig.from_env()
log = logging.getLogger("stepscope.operator")


@kopf.on.login(id="login")
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """The kubeconfig when one is given (local runs, tests), else the pod's service account."""
    if os.environ.get("KUBECONFIG"):
        return kopf.login_with_kubeconfig(**kwargs)
    return kopf.login_with_service_account(**kwargs)


@kopf.on.startup(id="startup")
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.INFO
    settings.posting.reporting_component = "stepscope"  # the SOURCE of its Kubernetes Events
    settings.posting.reporting_instance = os.environ.get("HOSTNAME", "stepscope-operator")
    settings.posting.event_name_prefix = "stepscope-event-"
    settings.watching.server_timeout = 60
    settings.watching.client_timeout = 90
    # The CRD is installed before the operator (Helm's crds/): discover the resource once at startup instead of
    # watching every CRD and every Namespace of the cluster, which needs no cluster-wide RBAC at all.
    settings.scanning.disabled = True
    # the master token: each namespace's sidecars get a token derived from it (stepscope_contract.tokens)
    master = (await asyncio.to_thread(Path(CONFIG.sidecar_token_file).read_text)).strip()
    if not master:
        raise kopf.PermanentError(f"the sidecar token file {CONFIG.sidecar_token_file} is empty")
    sidecars = SidecarClient(
        master,
        concurrency=CONFIG.signal_concurrency,
        timeout=CONFIG.signal_timeout_seconds,
        attempts=CONFIG.signal_attempts,
    )
    await sidecars.__aenter__()
    memo.deps = Deps(kube=Kube(), sidecars=sidecars, config=CONFIG)
    prometheus_metrics.serve(CONFIG.metrics_port)
    log.info("stepscope operator ready (namespaces: %s)", ",".join(CONFIG.watch_namespaces) or "all")


@kopf.on.cleanup(id="cleanup")
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    deps: Deps | None = memo.get("deps")
    if deps is not None:
        await deps.sidecars.__aexit__()
        deps.kube.close()


def _not_terminal(status: kopf.Status, **_: Any) -> bool:
    return status.get("phase") not in TERMINAL


TICK_BACKOFF_SECONDS = retry_after(CONFIG.tick_seconds)  # a failed tick runs again within seconds (config.retry_after)


@kopf.timer(*RESOURCE, id="lifecycle", interval=CONFIG.tick_seconds, backoff=TICK_BACKOFF_SECONDS, when=_not_terminal)
async def lifecycle(
    body: kopf.Body, memo: kopf.Memo, patch: kopf.Patch, uid: str, logger: kopf.Logger, **_: Any
) -> None:
    session_memo: Memo = memo.setdefault("lifecycle", Memo())
    outcome = await advance(dict(body), session_memo, memo.deps)
    for key, value in outcome.status.items():
        patch.status[key] = value
    for key, value in outcome.annotations.items():
        patch.metadata.annotations[key] = value
    for event in outcome.events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)
        # kopf's object logger prefixes [namespace/name]; the operator's log tells the same story as the events.
        (logger.warning if event.type == "Warning" else logger.info)("%s: %s", event.reason, event.message)
    prometheus_metrics.record_phase(uid, outcome.phase.value)


@kopf.on.delete(*RESOURCE, id="abort-and-release")
async def on_delete(body: kopf.Body, memo: kopf.Memo, uid: str, logger: kopf.Logger, **_: Any) -> None:
    session_memo: Memo = memo.setdefault("lifecycle", Memo())
    aborted = await abort_all(dict(body), session_memo, memo.deps)
    if aborted:
        logger.info("aborted in-flight captures on %s", ", ".join(aborted))
    prometheus_metrics.record_phase(uid, None)


@kopf.on.delete(*RESOURCE, id="delete-artifacts")
async def delete_artifacts(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """When the accepted spec asks for it: a cleanup Job deletes the recomputed folder; the finalizer waits for it."""
    namespace = str((body.get("metadata") or {}).get("namespace") or "default")
    plan = artifacts.plan_deletion(dict(body), memo.deps.config)
    name = plan.job["metadata"]["name"] if plan.job is not None else ""
    job = await memo.deps.kube.get_job(namespace, name) if plan.job is not None else None
    if job is None:  # first pass (retries while the Job runs say nothing new)
        for notice in plan.notices:
            kind = "Warning" if notice.warning else "Normal"
            kopf.event(body, type=kind, reason=notice.reason, message=notice.message)
            logger.warning("%s: %s", notice.reason, notice.message)
    if plan.job is None:
        return
    if job is None:
        job = await memo.deps.kube.create_job(namespace, plan.job)
    outcome, message = job_outcome(job)
    if outcome in ("running", "missing"):
        raise kopf.TemporaryError(f"cleanup Job {name} is deleting {plan.location}", delay=2)
    if outcome == "failed":
        text = f"cleanup Job {name} failed ({message}); {plan.location} may still hold artifacts (see the Job's log)"
        kopf.event(body, type="Warning", reason="ArtifactsNotDeleted", message=text)
        logger.warning(text)
        return
    kopf.event(body, type="Normal", reason="ArtifactsDeleted", message=f"{plan.location} deleted by Job {name}")
    logger.info("artifacts under %s deleted by Job %s", plan.location, name)
