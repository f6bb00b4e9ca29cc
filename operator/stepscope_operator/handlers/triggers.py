"""kopf handlers of ProfileTriggers: a thin timer over `trigger_evaluation` (handler ids explicit). The timer runs
every STEPSCOPE_TRIGGER_TICK_SECONDS; each trigger is evaluated at its own spec.evaluationIntervalSeconds. An
evaluation that fails (the API server unreachable) runs again after config.retry_after, not kopf's default minute."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import kopf

from stepscope_contract.constants import GROUP, TRIGGER_PLURAL, VERSION
from stepscope_operator.runtime.config import OperatorConfig, retry_after
from stepscope_operator.session.status import utcnow
from stepscope_operator.triggers.evaluation import TriggerDeps, run
from stepscope_operator.triggers.telemetry_client import TelemetryClient

RESOURCE = (GROUP, VERSION, TRIGGER_PLURAL)
CONFIG = OperatorConfig.from_env()
log = logging.getLogger("stepscope.operator.triggers")


@kopf.on.startup(id="trigger-startup")
async def startup(memo: kopf.Memo, **_: Any) -> None:
    master = (await asyncio.to_thread(Path(CONFIG.sidecar_token_file).read_text)).strip()
    client = TelemetryClient(master, concurrency=CONFIG.signal_concurrency, timeout=CONFIG.signal_timeout_seconds)
    memo.trigger_telemetry = await client.__aenter__()


@kopf.on.cleanup(id="trigger-cleanup")
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    client: TelemetryClient | None = memo.get("trigger_telemetry")
    if client is not None:
        await client.__aexit__()


@kopf.timer(
    *RESOURCE, id="evaluate", interval=CONFIG.trigger_tick_seconds, backoff=retry_after(CONFIG.trigger_tick_seconds)
)
async def evaluate(body: kopf.Body, memo: kopf.Memo, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> None:
    deps = TriggerDeps(kube=memo.deps.kube, telemetry=memo.trigger_telemetry, config=memo.deps.config)
    outcome = await run(dict(body), deps, utcnow())
    if outcome is None:
        return
    for key, value in outcome.status.items():
        patch.status[key] = value
    for kind, reason, message in outcome.events:
        kopf.event(body, type=kind, reason=reason, message=message)
        (logger.warning if kind == "Warning" else logger.info)("%s: %s", reason, message)
