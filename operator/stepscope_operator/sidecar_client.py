"""Async client of the sidecars' control API: bounded concurrency, per-request timeout, retries with backoff."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import ValidationError

from stepscope_contract.constants import AUTH_SCHEME, SIDECAR_API_PREFIX
from stepscope_contract.wire import CaptureRequest, CaptureStatus
from stepscope_operator import metrics
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
    def __init__(self, token: str, *, concurrency: int = 64, timeout: float = 5.0, attempts: int = 3) -> None:
        self._token = token
        self._semaphore = asyncio.Semaphore(concurrency)
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 3.0))
        self._attempts = attempts
        self._session: aiohttp.ClientSession | None = None
        self._concurrency = concurrency

    async def __aenter__(self) -> SidecarClient:
        connector = aiohttp.TCPConnector(limit=self._concurrency, force_close=False)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            headers={"Authorization": f"{AUTH_SCHEME} {self._token}"},
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> Reply:
        assert self._session is not None, "use SidecarClient as an async context manager"
        last = ""
        for attempt in range(self._attempts):
            if attempt:
                await asyncio.sleep(min(2.0, 0.2 * 2 ** (attempt - 1)))
            try:
                async with self._semaphore, self._session.request(method, url, json=body) as resp:
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
        reply = await self._call("POST", f"{target.base_url}{SIDECAR_API_PREFIX}/captures", request.wire())
        metrics.SIGNAL_LATENCY.observe(time.monotonic() - began)
        if reply.ok:
            metrics.TARGETS_SIGNALLED.inc()
        return reply

    async def get(self, target: Target, capture_id: str) -> Reply:
        return await self._call("GET", f"{target.base_url}{SIDECAR_API_PREFIX}/captures/{capture_id}")

    async def abort(self, target: Target, capture_id: str) -> Reply:
        return await self._call("POST", f"{target.base_url}{SIDECAR_API_PREFIX}/captures/{capture_id}/abort")
