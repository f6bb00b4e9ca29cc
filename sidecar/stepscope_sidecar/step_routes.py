"""`GET /v1/steps?last=N` (the hooks' recent steps, contract PodSteps) and the step metrics on `/metrics`, added to
the control API's app: the operator's triggers pull the first with the namespace's token, Prometheus scrapes the
second."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry

from stepscope_contract.step_telemetry import MAX_STEPS_PER_REQUEST, PodSteps
from stepscope_sidecar.step_metrics import StepCollector
from stepscope_sidecar.step_telemetry import rank_steps, read_rings

HOOK_DIR_KEY: web.AppKey[Path] = web.AppKey("step_hook_dir", Path)
POD_KEY: web.AppKey[str] = web.AppKey("step_pod", str)
DEFAULT_LAST = 256


async def get_steps(request: web.Request) -> web.Response:
    raw = request.query.get("last", str(DEFAULT_LAST))
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6) or not 1 <= int(raw) <= MAX_STEPS_PER_REQUEST:
        raise web.HTTPBadRequest(reason=f"last must be a whole number within 1..{MAX_STEPS_PER_REQUEST}")
    rings = read_rings(request.app[HOOK_DIR_KEY], int(raw))
    body = PodSteps(pod=request.app[POD_KEY] or None, ranks=[rank_steps(r) for r in rings])
    return web.Response(text=body.model_dump_json(by_alias=True, exclude_none=True), content_type="application/json")


def add_step_telemetry(app: web.Application, hook_dir: Path, pod: str | None, registry: CollectorRegistry) -> None:
    """The route, and the step metrics registered on the agent's registry (served by its /metrics)."""
    app[HOOK_DIR_KEY] = hook_dir
    app[POD_KEY] = pod or ""
    app.router.add_get("/v1/steps", get_steps)
    registry.register(StepCollector.from_env(hook_dir))
