"""kopf handlers: thin wrappers over `lifecycle`. Handler ids are explicit so that progress survives renames."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import kopf

from stepscope_contract.constants import FINALIZER, GROUP, PLURAL, VERSION
from stepscope_contract.session import Phase, ProfileSessionSpec
from stepscope_operator import artifacts, metrics
from stepscope_operator.config import OperatorConfig
from stepscope_operator.kube import Kube
from stepscope_operator.lifecycle import Deps, Memo, abort_all, advance
from stepscope_operator.sidecar_client import SidecarClient

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
    token = (await asyncio.to_thread(Path(CONFIG.sidecar_token_file).read_text)).strip()
    if not token:
        raise kopf.PermanentError(f"the sidecar token file {CONFIG.sidecar_token_file} is empty")
    sidecars = SidecarClient(
        token,
        concurrency=CONFIG.signal_concurrency,
        timeout=CONFIG.signal_timeout_seconds,
        attempts=CONFIG.signal_attempts,
    )
    await sidecars.__aenter__()
    memo.deps = Deps(kube=Kube(), sidecars=sidecars, config=CONFIG)
    metrics.serve(CONFIG.metrics_port)
    log.info("stepscope operator ready (namespaces: %s)", ",".join(CONFIG.watch_namespaces) or "all")


@kopf.on.cleanup(id="cleanup")
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    deps: Deps | None = memo.get("deps")
    if deps is not None:
        await deps.sidecars.__aexit__()
        deps.kube.close()


def _not_terminal(status: kopf.Status, **_: Any) -> bool:
    return status.get("phase") not in TERMINAL


@kopf.timer(*RESOURCE, id="lifecycle", interval=CONFIG.tick_seconds, when=_not_terminal)
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
    metrics.record_phase(uid, outcome.status.get("phase", body.get("status", {}).get("phase")))


@kopf.on.delete(*RESOURCE, id="abort-and-release")
async def on_delete(body: kopf.Body, memo: kopf.Memo, uid: str, logger: kopf.Logger, **_: Any) -> None:
    session_memo: Memo = memo.setdefault("lifecycle", Memo())
    aborted = await abort_all(dict(body), session_memo, memo.deps)
    if aborted:
        logger.info("aborted in-flight captures on %s", ", ".join(aborted))
    try:
        spec = ProfileSessionSpec.model_validate(body.get("spec") or {})
    except ValueError:
        spec = None
    uri = (body.get("status") or {}).get("artifactsUri")
    if spec is not None and spec.storage.delete_on_session_delete and uri:
        removed = await artifacts.delete_prefix(uri, spec.storage)
        logger.info("deleted %d artifact(s) under %s", removed, uri)
    metrics.record_phase(uid, None)
