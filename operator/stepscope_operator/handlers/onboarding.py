"""kopf handlers of onboarding (onboarding.py holds what is written): a labelled namespace, when it appears or gets
the label, and the listed namespaces at every start, receive their sidecar token Secret (and the analyzer's
ServiceAccount). The namespace handlers are registered only when `STEPSCOPE_ONBOARD_LABEL` is on:
they need list/watch on namespaces, which the chart grants only then."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import kopf

from stepscope_operator.onboarding.namespaces import (
    LABEL,
    LABEL_VALUE,
    OnboardingSettings,
    collection_path,
    refusal,
    stale_secret_patch,
    team_objects,
    token_secret,
)
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.runtime.kube import Kube

SETTINGS = OnboardingSettings.from_env(os.environ)
log = logging.getLogger("stepscope.operator.onboarding")


async def _master() -> str:
    return (await asyncio.to_thread(Path(OperatorConfig.from_env().sidecar_token_file).read_text)).strip()


async def write(kube: Kube, objects: list[dict[str, Any]]) -> list[str]:
    """Create each object unless it exists; a token Secret holding another token is patched. What changed, as words."""
    changed = []
    for obj in objects:
        refused = refusal(obj, SETTINGS)
        if refused is not None:
            raise ValueError(f"onboarding: {refused}")
        path = collection_path(obj)
        existing, created = await kube.create_or_get(path, obj)
        what = f"{obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}"
        if created:
            changed.append(f"created {what}")
        elif obj["kind"] == "Secret" and (patch := stale_secret_patch(existing, obj)) is not None:
            await kube.patch_merge(f"{path}/{obj['metadata']['name']}", patch)
            changed.append(f"updated {what}")
    return changed


RETRY_SECONDS = 30.0


async def onboard_listed_until_done(namespaces: tuple[str, ...], retry_seconds: float = RETRY_SECONDS) -> None:
    """Each listed namespace's token Secret; a namespace that cannot be written yet (it does not exist, a permission
    is missing) is tried again every `retry_seconds`, without holding the operator's start up."""
    master = await _master()
    pending = list(namespaces)
    while pending:
        kube = Kube()
        try:
            for namespace in list(pending):
                try:
                    for line in await write(kube, [token_secret(namespace, master, SETTINGS)]):
                        log.info("onboarding: %s", line)
                    pending.remove(namespace)
                except Exception as exc:  # retried below; the reason is logged each time
                    log.warning("onboarding: no token Secret in namespace %s yet: %s", namespace, exc)
        finally:
            kube.close()
        if pending:
            await asyncio.sleep(retry_seconds)


@kopf.on.startup(id="onboard-listed")
async def onboard_listed(memo: kopf.Memo, **_: Any) -> None:
    if SETTINGS.listed:
        memo.onboarding = asyncio.create_task(onboard_listed_until_done(SETTINGS.listed))


@kopf.on.cleanup(id="onboard-cleanup")
async def onboard_cleanup(memo: kopf.Memo, **_: Any) -> None:
    task: asyncio.Task[None] | None = memo.get("onboarding")
    if task is not None:
        task.cancel()


async def onboard_namespace(name: str, logger: kopf.Logger, type: str | None, **_: Any) -> None:
    if type == "DELETED":
        return
    kube = Kube()
    try:
        changed = await write(kube, team_objects(name, await _master(), SETTINGS))
    finally:
        kube.close()
    for line in changed:
        logger.info("onboarding: %s", line)


if SETTINGS.by_label:  # an event handler: nothing is stored on the namespace, each event (the first listing too)
    # makes sure of the objects, which costs a GET per object once they exist
    kopf.on.event("", "v1", "namespaces", labels={LABEL: LABEL_VALUE}, id="onboard")(onboard_namespace)
