"""A stand-in sidecar: a real HTTP server speaking the sidecar wire protocol (contract wire.py), checking the
bearer token and counting requests, whose captures go armed -> capturing -> uploaded on a short clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from stepscope_contract.step_telemetry import PodSteps
from stepscope_contract.wire import CaptureRequest, CaptureState, CaptureStatus, UploadedArtifact


@dataclass
class Capture:
    request: CaptureRequest
    started: float
    aborted: bool = False

    def status(self, upload_after: float) -> CaptureStatus:
        age = time.monotonic() - self.started
        if self.aborted:
            state = CaptureState.ABORTED
        elif age >= upload_after:
            state = CaptureState.UPLOADED
        elif age >= upload_after / 2:
            state = CaptureState.CAPTURING
        else:
            state = CaptureState.ARMED
        rank = self.request.rank or 0
        uri = f"{self.request.destination.session_uri}/ranks/{rank}/manifest.json"
        return CaptureStatus(
            capture_id=self.request.capture_id,
            state=state,
            message="",
            ranks=[rank],
            artifacts=[UploadedArtifact(rank=rank, uri=uri)] if state is CaptureState.UPLOADED else [],
            steps_captured=self.request.options.steps if state is CaptureState.UPLOADED else 0,
            updated_at=datetime.now(UTC),
        )


@dataclass
class StandinSidecar:
    host: str
    token: str
    upload_after: float = 1.0
    port: int = 0
    requests: Counter[str] = field(default_factory=Counter)
    captures: dict[str, Capture] = field(default_factory=dict)
    unauthorized: int = 0
    steps: PodSteps | None = None  # what GET /v1/steps serves (404 while None, as a sidecar without telemetry)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/captures", self._start)
        app.router.add_get("/v1/captures/{cid}", self._get)
        app.router.add_post("/v1/captures/{cid}/abort", self._abort)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/v1/steps", self._steps)
        return app

    async def _steps(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        self.requests["steps"] += 1
        if self.steps is None:
            return web.json_response({"error": "not found"}, status=404)
        last = int(request.query.get("last", "256"))
        ranks = [
            r.model_copy(
                update={
                    k: getattr(r, k)[-last:]
                    for k in ("ended_at", "duration_ms", "backward_ms", "data_wait_ms", "profiled")
                }
            )
            for r in self.steps.ranks
        ]
        return web.json_response(PodSteps(pod=self.steps.pod, ranks=ranks).wire())

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    def _authorized(self, request: web.Request) -> bool:
        ok = request.headers.get("Authorization") == f"Bearer {self.token}"
        if not ok:
            self.unauthorized += 1
        return ok

    async def _start(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        self.requests["start"] += 1
        body = CaptureRequest.model_validate(await request.json())
        existing = self.captures.get(body.capture_id)
        if existing is None:
            if any(not c.aborted for c in self.captures.values()):
                return web.json_response({"error": "busy"}, status=409)
            self.captures[body.capture_id] = existing = Capture(body, time.monotonic())
            return web.json_response(existing.status(self.upload_after).wire(), status=202)
        return web.json_response(existing.status(self.upload_after).wire())

    async def _get(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        self.requests["get"] += 1
        capture = self.captures.get(request.match_info["cid"])
        if capture is None:
            return web.json_response({"error": "unknown capture"}, status=404)
        return web.json_response(capture.status(self.upload_after).wire())

    async def _abort(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": "unauthorized"}, status=401)
        self.requests["abort"] += 1
        capture = self.captures.get(request.match_info["cid"])
        if capture is None:
            return web.json_response({"error": "unknown capture"}, status=404)
        capture.aborted = True
        return web.json_response(capture.status(self.upload_after).wire())


class SidecarFleet:
    """Stand-in sidecars on 127.0.0.x addresses, served from one background event loop."""

    def __init__(self, token: str, count: int, upload_after: float = 1.0, base: str = "127.0.9.") -> None:
        self.sidecars = [StandinSidecar(f"{base}{i + 2}", token, upload_after) for i in range(count)]
        self._loop = asyncio.new_event_loop()
        self._runners: list[web.AppRunner] = []
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> SidecarFleet:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start_all(), self._loop).result(30)
        return self

    async def _start_all(self) -> None:
        for sidecar in self.sidecars:
            runner = web.AppRunner(sidecar.app(), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, sidecar.host, 0)
            await site.start()
            sidecar.port = runner.addresses[0][1]
            self._runners.append(runner)

    async def stop_one(self, index: int) -> None:
        runner = self._runners[index]
        if runner.server is not None:
            await runner.cleanup()

    def kill(self, index: int) -> None:
        """Stop one sidecar's server: later connections to it are refused."""
        asyncio.run_coroutine_threadsafe(self.stop_one(index), self._loop).result(10)

    def __exit__(self, *_: Any) -> None:
        async def stop() -> None:
            for runner in self._runners:
                if runner.server is not None:
                    await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
