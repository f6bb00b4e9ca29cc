"""What the benchmarks' simulated sidecars share: one aiohttp app serving the sidecar's capture routes on many
listening sockets of one loopback address (one socket per simulated pod; the handler tells them apart by the port
the request came in on), bound by the harness itself so no port picked elsewhere can collide."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve_captures(host: str, count: int, start: Handler, get: Handler) -> list[int]:
    """POST /v1/captures -> `start`, GET /v1/captures/{cid} -> `get`, on `count` sockets; their ports, in order."""
    app = web.Application()
    app.router.add_post("/v1/captures", start)
    app.router.add_get("/v1/captures/{cid}", get)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ports = []
    for _ in range(count):
        site = web.TCPSite(runner, host, 0, backlog=256)
        await site.start()
        assert site._server is not None
        ports.append(site._server.sockets[0].getsockname()[1])
    return ports


def arrival_port(request: web.Request) -> int:
    """The local port a request came in on: which simulated pod it is for."""
    return int(request.transport.get_extra_info("sockname")[1]) if request.transport else 0
