"""Async client of the sidecars' control API over `http1`: bounded concurrency, per-request timeout, retries with
backoff.

Each request carries the token of the target pod's namespace, derived from the master the operator holds
(stepscope_contract.tokens): a sidecar accepts only its own namespace's token."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from pydantic import ValidationError

from stepscope_contract.constants import AUTH_SCHEME, SIDECAR_API_PREFIX
from stepscope_contract.tokens import namespace_token
from stepscope_contract.wire import CaptureRequest, CaptureStatus
from stepscope_operator.runtime import metrics as prometheus_metrics
from stepscope_operator.session.targets import Target
from stepscope_operator.sidecars import http1


@dataclass(frozen=True)
class Reply:
    status: CaptureStatus | None = None
    error: str = ""  # why there is no status (connection refused, 401, timeout, ...)
    http_status: int = 0

    @property
    def ok(self) -> bool:
        return self.status is not None


class StartBodies:
    """A tick's start request serialised once: every target's body is the same JSON but for its rank, spliced in
    front (at 10,000 targets, copying and serialising the model per target was a sixth of the fan-out's CPU)."""

    def __init__(self, request: CaptureRequest) -> None:
        shared = request.model_copy(update={"rank": None}).wire()  # unset fields are left out, rank included
        self._rest = json.dumps(shared, separators=(",", ":")).encode()[1:]  # after the opening brace

    def for_rank(self, rank: int | None) -> bytes:
        return b"{" + self._rest if rank is None else b'{"rank":%d,' % rank + self._rest


class SidecarClient:
    """Talks to many sidecars at once: at most `concurrency` exchanges in flight, each on its own connection
    (every target is its own endpoint, so nothing could be pooled; the open sockets stay at the concurrency)."""

    def __init__(self, master: str, *, concurrency: int = 64, timeout: float = 5.0, attempts: int = 3) -> None:
        self._master = master
        self._headers: dict[str, dict[str, str]] = {}
        self._semaphore = asyncio.Semaphore(concurrency)
        self._timeout = timeout
        self._attempts = attempts

    async def __aenter__(self) -> SidecarClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    def _auth(self, namespace: str) -> dict[str, str]:
        headers = self._headers.get(namespace)
        if headers is None:
            headers = {"Authorization": f"{AUTH_SCHEME} {namespace_token(self._master, namespace)}"}
            self._headers[namespace] = headers
        return headers

    async def _call(self, target: Target, method: str, path: str, data: bytes | None = None) -> Reply:
        full_path = f"{SIDECAR_API_PREFIX}{path}"
        headers = self._auth(target.namespace)
        last = ""
        for attempt in range(self._attempts):
            if attempt:
                await asyncio.sleep(min(2.0, 0.2 * 2 ** (attempt - 1)))
            try:
                async with self._semaphore, asyncio.timeout(self._timeout):
                    resp = await http1.request(method, target.ip, target.port, full_path, headers=headers, body=data)
            except http1.HttpError as exc:
                last = str(exc)
                continue
            except TimeoutError:
                last = f"no reply within {self._timeout:g} s"
                continue
            if resp.status >= 500:
                last = f"sidecar answered {resp.status}: {resp.text[:200]}"
                continue
            if resp.status >= 400:
                return Reply(error=f"sidecar answered {resp.status}: {resp.text[:300]}", http_status=resp.status)
            try:
                return Reply(status=CaptureStatus.model_validate_json(resp.body), http_status=resp.status)
            except ValidationError as exc:
                return Reply(error=f"sidecar sent an invalid status: {exc.errors()[0]['msg']}")
        url = f"{target.base_url}{full_path}"
        return Reply(error=f"sidecar unreachable at {url} after {self._attempts} attempts ({last})")

    async def start(self, target: Target, body: bytes) -> Reply:
        """Start a capture; `body` is the request's JSON for this target (StartBodies.for_rank)."""
        began = time.monotonic()
        reply = await self._call(target, "POST", "/captures", body)
        prometheus_metrics.SIGNAL_LATENCY.observe(time.monotonic() - began)
        if reply.ok:
            prometheus_metrics.TARGETS_SIGNALLED.inc()
        return reply

    async def get(self, target: Target, capture_id: str) -> Reply:
        return await self._call(target, "GET", f"/captures/{capture_id}")

    async def abort(self, target: Target, capture_id: str) -> Reply:
        return await self._call(target, "POST", f"/captures/{capture_id}/abort")
