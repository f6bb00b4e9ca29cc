"""The operator's HTTP/1.1 client for sidecars: reply parsing (pure) and real exchanges with an aiohttp server, the
server the sidecar runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from stepscope_operator.sidecars import http1
from stepscope_operator.sidecars.bounded_each import each


@pytest.mark.unit
def test_request_bytes_carry_host_length_and_body() -> None:
    data = http1.encode_request("POST", "10.0.0.7", 9400, "/v1/captures", headers={"Authorization": "Bearer t"},
                                body=b'{"a":1}')  # fmt: skip
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/captures HTTP/1.1"
    assert {"Host: 10.0.0.7:9400", "Connection: close", "Authorization: Bearer t", "Content-Length: 7"} <= set(lines)
    assert body == b'{"a":1}'
    ipv6 = http1.encode_request("GET", "fd00::1", 80, "/x", headers={}, body=None)
    assert b"Host: [fd00::1]:80\r\n" in ipv6
    assert b"Content-Length" not in ipv6


@pytest.mark.unit
def test_replies_with_length_chunked_and_to_eof() -> None:
    assert http1.parse_reply(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}extra") == http1.HttpReply(
        202, b"{}"
    )
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    assert http1.parse_reply(chunked).body == b"abcde"
    assert http1.parse_reply(b"HTTP/1.0 404 Not Found\r\n\r\nnope").status == 404


@pytest.mark.unit
@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"", "empty reply"),
        (b"HTTP/1.1 200 OK\r\nContent-", "inside its headers"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "truncated reply: 3 of 10"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nabc", "truncated chunked"),
    ],
)
def test_malformed_replies_say_what_is_wrong(raw: bytes, says: str) -> None:
    with pytest.raises(http1.HttpError, match=says):
        http1.parse_reply(raw)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, int, list[dict[str, object]]]]:
    seen: list[dict[str, object]] = []
    released = asyncio.Event()  # the slow reply comes only at teardown (the server's cleanup waits for its handlers)

    async def post(request: web.Request) -> web.Response:
        seen.append({"auth": request.headers.get("Authorization"), "body": await request.json()})
        return web.json_response({"state": "armed"}, status=202)

    async def big(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()  # chunked, as aiohttp streams a reply of unknown length
        await resp.prepare(request)
        for _ in range(3):
            await resp.write(b"x" * 1000)
        await resp.write_eof()
        return resp

    async def huge(request: web.Request) -> web.Response:
        return web.Response(body=b"y" * (http1.MAX_REPLY + 10))

    async def slow(request: web.Request) -> web.Response:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(released.wait(), 5)
        return web.Response(text="late")

    app = web.Application()
    app.router.add_post("/v1/captures", post)
    app.router.add_get("/big", big)
    app.router.add_get("/huge", huge)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    assert isinstance(site._server, asyncio.Server)
    yield "127.0.0.1", site._server.sockets[0].getsockname()[1], seen
    released.set()
    await runner.cleanup()


@pytest.mark.integration
async def test_exchanges_with_an_aiohttp_server(server: tuple[str, int, list[dict[str, object]]]) -> None:
    host, port, seen = server
    body = json.dumps({"captureId": "c1"}).encode()
    reply = await http1.request("POST", host, port, "/v1/captures", headers={"Authorization": "Bearer k"}, body=body)
    assert (reply.status, json.loads(reply.body)) == (202, {"state": "armed"})
    assert seen == [{"auth": "Bearer k", "body": {"captureId": "c1"}}]
    assert (await http1.request("GET", host, port, "/big", headers={})).body == b"x" * 3000
    assert (await http1.request("GET", host, port, "/nowhere", headers={})).status == 404
    with pytest.raises(http1.HttpError, match="larger than"):
        await http1.request("GET", host, port, "/huge", headers={})
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await http1.request("GET", host, port, "/slow", headers={})


@pytest.mark.integration
async def test_a_closed_port_is_an_http_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    free = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(http1.HttpError, match="ConnectionRefused"):
        await http1.request("GET", "127.0.0.1", free, "/x", headers={})


@pytest.mark.unit
async def test_each_runs_every_item_once_with_bounded_width() -> None:
    running, peak, done = 0, 0, []

    async def act(item: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        done.append(item)
        running -= 1

    await each(range(100), act, 7)
    assert sorted(done) == list(range(100))
    assert peak == 7
    await each([], act, 4)  # nothing to do is fine
    assert len(done) == 100


@pytest.mark.integration
def test_exchanges_on_uvloop_the_operators_loop() -> None:
    """The operator runs on uvloop, whose transports are not asyncio's classes: the same exchanges there."""
    uvloop = pytest.importorskip("uvloop")

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lengths = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
        length = int(lengths[0].split(b":")[1])
        body = await reader.readexactly(length)
        payload = b"z" * (http1.MAX_REPLY + 1) if body == b"huge" else body[::-1]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()
        writer.close()

    async def main() -> tuple[http1.HttpReply, str]:
        server = await asyncio.start_server(reply, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, asyncio.timeout(10):
            ok = await http1.request("POST", "127.0.0.1", port, "/v1/captures", headers={}, body=b"abc")
            with pytest.raises(http1.HttpError) as too_big:
                await http1.request("POST", "127.0.0.1", port, "/v1/captures", headers={}, body=b"huge")
        return ok, str(too_big.value)

    ok, too_big = uvloop.run(main())
    assert (ok.status, ok.body) == (200, b"cba")
    assert "larger than" in too_big
