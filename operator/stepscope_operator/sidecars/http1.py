"""A minimal HTTP/1.1 client for the sidecars' control API: one connection per request (`Connection: close`), the
whole reply read to EOF, bounded in size.

Why not aiohttp's client: every target is its own endpoint, so nothing is pooled, and at 10,000 targets the
per-request cost of a general client (URL objects, happy-eyeballs connection setup, cookie and redirect handling,
its stream machinery) is most of the operator's CPU during fan-out (bench/fanout.py, profiled with py-spy). Plain
asyncio streams did the same exchange for about a third of the CPU, and a bare protocol (one object per exchange,
no reader, writer or per-read futures) for less. Only what the sidecar speaks is supported:
plain HTTP to an IP address, a body with Content-Length, a reply with Content-Length, chunked or to EOF.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

MAX_REPLY = 1 << 20  # a capture status is a few kB; anything larger is not a sidecar


class HttpError(Exception):
    """The exchange failed (connection, timeout, malformed or oversized reply); the message says how."""


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def encode_request(
    method: str, host: str, port: int, path: str, *, headers: dict[str, str], body: bytes | None
) -> bytes:
    """The request's bytes: request line, Host, the given headers, Content-Length and the body."""
    host_header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host_header}", "Connection: close", "Accept: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            raise HttpError("truncated chunked reply")
        try:
            size = int(data[pos:end].split(b";", 1)[0], 16)
        except ValueError:
            raise HttpError("malformed chunk size in the reply") from None
        if size == 0:
            return bytes(out)
        start = end + 2
        if start + size > len(data):
            raise HttpError("truncated chunked reply")
        out += data[start : start + size]
        pos = start + size + 2


def parse_reply(raw: bytes) -> HttpReply:
    """Status and body of a whole reply (read to EOF)."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise HttpError("the reply ended inside its headers" if raw else "empty reply")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise HttpError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(rest)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise HttpError("malformed Content-Length in the reply") from None
        if len(rest) < length:
            raise HttpError(f"truncated reply: {len(rest)} of {length} bytes")
        body = rest[:length]
    else:
        body = rest
    return HttpReply(int(parts[1]), body)


class _Exchange(asyncio.Protocol):
    """One request written on connect, the reply gathered to EOF, the result (or the failure) set on `done`."""

    def __init__(self, request: bytes, done: asyncio.Future[bytes]) -> None:
        self._request = request
        self._done = done
        self._chunks: list[bytes] = []
        self._size = 0
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        cast(asyncio.WriteTransport, transport).write(self._request)  # uvloop's transports are not its subclasses

    def data_received(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > MAX_REPLY:
            self._finish(HttpError(f"reply larger than {MAX_REPLY} bytes"))
            assert self._transport is not None
            self._transport.close()
            return
        self._chunks.append(data)

    def eof_received(self) -> bool:
        self._finish(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(exc)

    def _finish(self, exc: BaseException | None) -> None:
        if self._done.done():
            return
        if exc is None:
            self._done.set_result(b"".join(self._chunks))
        else:
            self._done.set_exception(exc)


async def _exchange(host: str, port: int, request: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()
    transport, _ = await loop.create_connection(lambda: _Exchange(request, done), host, port)
    try:
        return await done
    finally:
        transport.close()


async def request(
    method: str, host: str, port: int, path: str, *, headers: dict[str, str], body: bytes | None = None
) -> HttpReply:
    """One exchange; HttpError when it fails for any reason. The caller bounds it in time (asyncio.timeout), and a
    TimeoutError leaves the connection closed."""
    data = encode_request(method, host, port, path, headers=headers, body=body)
    try:
        raw = await _exchange(host, port, data)
    except OSError as exc:
        raise HttpError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None
    return parse_reply(raw)
