"""What a hostile telemetry reply costs the operator's client, measured in a fresh process (peak RSS, VmHWM).

Checks: one pod's reply of MAX_BODY bytes holding ~4.2M step values (`0,` each) is refused, naming the bound, and
takes the process's peak memory up by less than 64 MiB; the value count a reply is charged before it is parsed is
never below what the JSON holds (hypothesis, any JSON value)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope_operator.triggers.telemetry_client import value_bound

MiB = 1 << 20

_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from stepscope_operator.triggers import telemetry_client
    from stepscope_operator.session.targets import Target
    from stepscope_operator.triggers.telemetry_client import MAX_BODY, TelemetryClient

    def peak():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    head, tail = b'{"pod":"p","ranks":[{"rank":0,"endedAt":[', b'0]}]}'
    count = (MAX_BODY - len(head) - len(tail)) // 2
    body = head + b"0," * count + tail

    async def main():
        async def handle(reader, writer):
            while (await reader.readline()) not in (b"\\r\\n", b""):
                pass
            writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n")
            writer.write(b"Content-Length: %d\\r\\n\\r\\n" % len(body))
            writer.write(body)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        target = Target(pod="hostile", uid="u", node=None, rank=None, ip="127.0.0.1", port=port)
        async with TelemetryClient("m" * 32) as client:
            await client.pull([], 10)  # the client's own first costs
            before = peak()
            pull = await client.pull([target], 2048)
            grown = peak() - before
        server.close()
        print(json.dumps({"values": count, "size": len(body), "grown": grown, "failures": pull.failures}))

    asyncio.run(main())
    """
)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_an_8_mib_reply_of_millions_of_values_costs_little() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["values"] > 4_000_000 and result["size"] > 8 * MiB - 1024
    assert "hostile" in result["failures"] and "values" in result["failures"]["hostile"], result["failures"]
    assert result["grown"] < 64 * MiB, f"the reply took the peak memory up by {result['grown'] / MiB:.0f} MiB"


def _values(value: Any) -> int:
    if isinstance(value, list):
        return len(value) + sum(_values(v) for v in value)
    if isinstance(value, dict):
        return len(value) + sum(_values(v) for v in value.values())
    return 0


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=40,
)


@pytest.mark.unit
@settings(max_examples=200)
@given(_JSON, st.booleans())
def test_the_count_before_parsing_is_never_below_the_values(value: Any, spaced: bool) -> None:
    text = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":"))
    assert value_bound(text.encode()) >= _values(value)
