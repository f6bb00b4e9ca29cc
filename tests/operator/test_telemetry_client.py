"""The operator's telemetry client against a raw TCP server that writes its reply in pieces, as a pod network does.

Checks: a reply sent in two writes 50 ms apart parses (the whole body is read, not the first segment); an 8-rank
reply of about 300 KB parses; a reply over the per-pod cap is refused with the cap in the message; the replies of one
evaluation together stay under the per-evaluation caps, in bytes read and in step values parsed (pods beyond them
are failures naming the cap); a reply with more steps than asked, or with NaN in it, is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from stepscope_contract.step_telemetry import PodSteps, RankSteps
from stepscope_operator.session.targets import Target
from stepscope_operator.triggers import telemetry_client
from stepscope_operator.triggers.telemetry_client import TelemetryClient

pytestmark = pytest.mark.integration


def _pod(ranks: int, steps: int) -> bytes:
    series = [
        RankSteps(
            rank=r,
            world_size=ranks,
            steps_total=10_000,
            ended_at=[1_700_000_000.0 + i * 0.123456 for i in range(steps)],
            duration_ms=[123.456789 + i % 7 for i in range(steps)],
            backward_ms=[45.678912] * steps,
            data_wait_ms=[1.234567] * steps,
            profiled=[False] * steps,
        )
        for r in range(ranks)
    ]
    return PodSteps(pod="p", ranks=series).model_dump_json(by_alias=True).encode()


async def _in_pieces(writer: asyncio.StreamWriter, data: bytes, pieces: int = 2, pause: float = 0.05) -> None:
    size = max(1, len(data) // pieces)
    for start in range(0, len(data), size):
        writer.write(data[start : start + size])
        await writer.drain()
        await asyncio.sleep(pause)


async def _serve(body: bytes, pieces: int) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        writer.write(head)
        await writer.drain()
        await _in_pieces(writer, body, pieces)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


@pytest.fixture
async def serving() -> AsyncIterator[Callable[[bytes, int], object]]:
    servers: list[asyncio.Server] = []

    async def start(body: bytes, pieces: int = 2) -> Target:
        server, port = await _serve(body, pieces)
        servers.append(server)
        return Target(pod=f"pod-{port}", uid="u", node=None, rank=None, ip="127.0.0.1", port=port)

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def test_a_reply_in_two_writes_parses(serving) -> None:  # type: ignore[no-untyped-def]
    body = _pod(1, 24)
    assert 1_000 < len(body) < 4_000
    target = await serving(body, 2)
    async with TelemetryClient("m" * 32) as client:
        pull = await client.pull([target], 24)
    assert pull.failures == {}
    assert [r.rank for r in pull.ranks] == [0]
    assert len(pull.ranks[0].duration_ms) == 24


async def test_an_eight_rank_reply_of_300_kb_parses(serving) -> None:  # type: ignore[no-untyped-def]
    body = _pod(8, 700)
    assert len(body) > 300_000
    target = await serving(body, 40)
    async with TelemetryClient("m" * 32) as client:
        pull = await client.pull([target], 700)
    assert pull.failures == {}
    assert [r.rank for r in pull.ranks] == list(range(8))


async def test_a_reply_over_the_pod_cap_is_refused(serving, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    body = _pod(2, 64)
    monkeypatch.setattr(telemetry_client, "MAX_BODY", len(body) - 1)
    target = await serving(body, 4)
    async with TelemetryClient("m" * 32) as client:
        pull = await client.pull([target], 64)
    assert pull.ranks == ()
    assert f"larger than {len(body) - 1} bytes" in pull.failures[target.pod]


async def test_the_replies_of_one_evaluation_are_bounded_together(serving, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    body = _pod(1, 64)
    monkeypatch.setattr(telemetry_client, "MAX_TOTAL_BYTES", int(len(body) * 2.5))
    targets = [await serving(body, 2) for _ in range(4)]
    async with TelemetryClient("m" * 32, concurrency=1) as client:
        pull = await client.pull(targets, 64)
    assert pull.answered == 2
    assert len(pull.failures) == 2
    assert all("bytes in one evaluation" in why for why in pull.failures.values())


async def test_step_values_of_one_evaluation_are_bounded(serving, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    body = _pod(2, 10)  # 2 ranks x 10 steps x 5 lists: 100 values, counted as 126 before parsing (fields included)
    assert telemetry_client.value_bound(body) == 126
    monkeypatch.setattr(telemetry_client, "MAX_TOTAL_VALUES", 260)  # two counted at once fit, never a third
    targets = [await serving(body, 1) for _ in range(3)]
    async with TelemetryClient("m" * 32, concurrency=1) as client:
        pull = await client.pull(targets, 10)
    assert pull.answered == 2
    (why,) = pull.failures.values()
    assert "over 260 step values in one evaluation" in why


async def test_more_steps_than_asked_are_refused(serving) -> None:  # type: ignore[no-untyped-def]
    target = await serving(_pod(1, 30), 1)
    async with TelemetryClient("m" * 32) as client:
        pull = await client.pull([target], 20)
    assert pull.ranks == ()
    assert "more than the 20 steps asked" in pull.failures[target.pod]


async def test_a_reply_with_nan_is_refused(serving) -> None:  # type: ignore[no-untyped-def]
    body = _pod(1, 4).replace(b"123.456789", b"NaN", 1)
    assert b"NaN" in body
    target = await serving(body, 1)
    async with TelemetryClient("m" * 32) as client:
        pull = await client.pull([target], 4)
    assert pull.ranks == ()
    assert "invalid reply" in pull.failures[target.pod]
