"""Ports for servers started later are drawn below the kernel's ephemeral range, where connections never land."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from stepscope_local import ports

pytestmark = pytest.mark.unit


def test_ports_come_from_below_the_ephemeral_range_and_are_free() -> None:
    low = ports.ephemeral_low()
    drawn = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= p < low for p in drawn)
    assert len(drawn) > 10  # spread, not one port handed out again and again
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", drawn.pop()))


def test_the_range_is_read_from_the_kernel_or_defaults(tmp_path: Path) -> None:
    table = tmp_path / "ip_local_port_range"
    table.write_text("40000\t60999\n")
    assert ports.ephemeral_low(table) == 40000
    assert ports.ephemeral_low(tmp_path / "missing") == 32768
    table.write_text("garbage")
    assert ports.ephemeral_low(table) == 32768


def test_without_room_below_the_range_any_free_port_will_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "ephemeral_low", lambda: ports.LOWEST)
    port = ports.free_port()
    assert port >= ports.LOWEST  # the kernel's choice
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_taken_port_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    free = ports.free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        draws = iter([taken, taken, free])
        monkeypatch.setattr("stepscope_local.ports.random.randrange", lambda a, b: next(draws))
        assert ports.free_port() == free
