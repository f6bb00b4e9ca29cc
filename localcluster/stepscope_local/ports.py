"""A free TCP port for a server that another process binds later (moto, the operator's probes, a job's rendezvous).

A port chosen by binding port 0 comes from the kernel's ephemeral range (net.ipv4.ip_local_port_range), the range
every outgoing connection and every other port-0 bind also draws from: in the seconds until the server binds it,
any connection opened on the machine can take it, and the server then fails to start or, worse, another server
answers on it. So the port is drawn at random below that range, where only a bind to that very port can take it,
and checked free by binding it; port 0 remains the fallback when nothing below the range is free.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000
"""ports below this are left alone (well-known and registered services)"""
TRIES = 64


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int:
    """The first port of the kernel's ephemeral range (Linux's default 32768 when it cannot be read)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that is free now, below the ephemeral range when one is (see the module docstring)."""
    low = ephemeral_low()
    for _ in range(TRIES if low > LOWEST else 0):
        port = random.randrange(LOWEST, low)  # noqa: S311 - spreading ports, not a secret
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
        return chosen
