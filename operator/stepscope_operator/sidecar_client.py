"""Async client of the sidecars' control API: bounded concurrency, per-request timeout, retries with backoff.

Each request carries the token of the target pod's namespace, derived from the master the operator holds
(stepscope_contract.tokens): a sidecar accepts only its own namespace's token."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import ValidationError

from stepscope_contract.constants import AUTH_SCHEME, SIDECAR_API_PREFIX
from stepscope_contract.tokens import namespace_token
from stepscope_contract.wire import CaptureRequest, CaptureStatus
from stepscope_operator import prometheus_metrics
from stepscope_operator.targets import Target


@dataclass(frozen=True)
class Reply:
    status: CaptureStatus | None = None
    error: str = ""  # why there is no status (connection refused, 401, timeout, ...)
    http_status: int = 0

    @property
    def ok(self) -> bool:
        return self.status is not None


class SidecarClient:
    def __init__(self, master: str, *, concurrency: int = 64, timeout: float = 5.0, attempts: int = 3) -> None:
        self._master = master
        self._headers: dict[str, dict[str, str]] = {}
        self._semaphore = asyncio.Semaphore(concurrency)
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 3.0))
        self._attempts = attempts
        self._session: aiohttp.ClientSession | None = None
        self._concurrency = concurrency

    async def __aenter__(self) -> SidecarClient:
        connector = aiohttp.TCPConnector(limit=self._concurrency, force_close=False)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self

    def _auth(self, namespace: str) -> dict[str, str]:
        headers = self._headers.get(namespace)
        if headers is None:
            headers = {"Authorization": f"{AUTH_SCHEME} {namespace_token(self._master, namespace)}"}
            self._headers[namespace] = headers
        return headers

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def _call(self, target: Target, method: str, path: str, body: dict[str, Any] | None = None) -> Reply:
        assert self._session is not None, "use SidecarClient as an async context manager"
        url = f"{target.base_url}{SIDECAR_API_PREFIX}{path}"
        headers = self._auth(target.namespace)
        last = ""
        for attempt in range(self._attempts):
            if attempt:
                await asyncio.sleep(min(2.0, 0.2 * 2 ** (attempt - 1)))
            try:
                async with self._semaphore, self._session.request(method, url, json=body, headers=headers) as resp:
                    text = await resp.text()
                    if resp.status >= 500:
                        last = f"sidecar answered {resp.status}: {text[:200]}"
                        continue
                    if resp.status >= 400:
                        return Reply(error=f"sidecar answered {resp.status}: {text[:300]}", http_status=resp.status)
                    try:
                        return Reply(status=CaptureStatus.model_validate_json(text), http_status=resp.status)
                    except ValidationError as exc:
                        return Reply(error=f"sidecar sent an invalid status: {exc.errors()[0]['msg']}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return Reply(error=f"sidecar unreachable at {url} after {self._attempts} attempts ({last})")

    async def start(self, target: Target, request: CaptureRequest) -> Reply:
        began = time.monotonic()
        reply = await self._call(target, "POST", "/captures", request.wire())
        prometheus_metrics.SIGNAL_LATENCY.observe(time.monotonic() - began)
        if reply.ok:
            prometheus_metrics.TARGETS_SIGNALLED.inc()
        return reply

    async def get(self, target: Target, capture_id: str) -> Reply:
        return await self._call(target, "GET", f"/captures/{capture_id}")

    async def abort(self, target: Target, capture_id: str) -> Reply:
        return await self._call(target, "POST", f"/captures/{capture_id}/abort")
