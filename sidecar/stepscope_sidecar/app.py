"""aiohttp routes of the control API (contract wire.py); every route but /healthz needs the bearer token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ValidationError

from stepscope_contract.constants import AUTH_HEADER
from stepscope_contract.wire import CaptureRequest, ErrorBody
from stepscope_sidecar.agent import Agent, Busy
from stepscope_sidecar.auth import authorized
from stepscope_sidecar.destinations import DestinationError, DestinationPolicy

AGENT_KEY: web.AppKey[Agent] = web.AppKey("agent", Agent)
TOKEN_KEY: web.AppKey[str] = web.AppKey("token", str)
POLICY_KEY: web.AppKey[DestinationPolicy] = web.AppKey("destinations", DestinationPolicy)
OPEN_PATHS = frozenset({"/healthz"})
MAX_BODY = 256 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(
        text=model.model_dump_json(by_alias=True, exclude_none=True), status=status, content_type="application/json"
    )


def _error(status: int, error: str, detail: str = "") -> web.Response:
    return _json(ErrorBody(error=error, detail=detail), status)


@web.middleware
async def auth_and_count(request: web.Request, handler: Handler) -> web.StreamResponse:
    agent = request.app[AGENT_KEY]
    route = request.match_info.route.resource.canonical if request.match_info.route.resource else "unknown"
    if request.path not in OPEN_PATHS and not authorized(request.headers.get(AUTH_HEADER), request.app[TOKEN_KEY]):
        response: web.StreamResponse = _error(401, "unauthorized", "a valid bearer token is required")
        response.headers["WWW-Authenticate"] = 'Bearer realm="stepscope-sidecar"'
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = _error(exc.status, exc.reason)
    agent.metrics.requests.labels(route=route, code=str(response.status)).inc()
    return response


async def start_capture(request: web.Request) -> web.Response:
    agent = request.app[AGENT_KEY]
    try:
        body = await request.read()
        capture = CaptureRequest.model_validate_json(body)
    except ValidationError as exc:
        return _error(400, "invalid capture request", str(exc)[:2000])
    try:
        request.app[POLICY_KEY].check(capture)
    except DestinationError as exc:
        return _error(400, "invalid destination", str(exc))
    try:
        status, created = agent.start(capture)
    except Busy as exc:
        return _error(409, "busy", str(exc))
    return _json(status, 202 if created else 200)


async def get_capture(request: web.Request) -> web.Response:
    run = request.app[AGENT_KEY].get(request.match_info["capture_id"])
    if run is None:
        return _error(404, "unknown capture id")
    return _json(run.status)


async def abort_capture(request: web.Request) -> web.Response:
    run = request.app[AGENT_KEY].get(request.match_info["capture_id"])
    if run is None:
        return _error(404, "unknown capture id")
    await run.abort()
    return _json(run.status)


async def agent_status(request: web.Request) -> web.Response:
    return _json(request.app[AGENT_KEY].status())


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def metrics(request: web.Request) -> web.Response:
    agent = request.app[AGENT_KEY]
    agent.status()  # refresh gauges
    return web.Response(body=generate_latest(agent.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _on_shutdown(app: web.Application) -> None:
    await app[AGENT_KEY].shutdown()


def build_app(agent: Agent, token: str, destinations: DestinationPolicy) -> web.Application:
    app = web.Application(middlewares=[auth_and_count], client_max_size=MAX_BODY)
    app[AGENT_KEY] = agent
    app[TOKEN_KEY] = token
    app[POLICY_KEY] = destinations
    app.router.add_post("/v1/captures", start_capture)
    app.router.add_get("/v1/captures/{capture_id}", get_capture)
    app.router.add_post("/v1/captures/{capture_id}/abort", abort_capture)
    app.router.add_get("/v1/status", agent_status)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.on_shutdown.append(_on_shutdown)
    return app
