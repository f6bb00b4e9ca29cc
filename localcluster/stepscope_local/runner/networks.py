"""Loopback networks for pod IPs, one per local cluster running on a machine.

Each cluster's pods listen on IPs of a /16 inside 127.0.0.0/8 (127.N.0.2, 127.N.0.3, ...), and every sidecar on the
same port, so two clusters running at once (the test suite's workers, a demo beside a test) must not share a
network. A cluster claims one with an exclusive lock on a file named for the network in the temp directory, tried in
random order, and holds it as long as it runs; the operating system drops the lock when the process ends, however it
ends, so a crashed cluster leaves no claim behind.
"""

from __future__ import annotations

import fcntl
import random
import tempfile
from pathlib import Path
from typing import IO

CLAIMS = Path(tempfile.gettempdir()) / "stepscope-local-networks"


class NetworkClaim:
    """A loopback /16 this cluster alone hands pod IPs from (until `release`)."""

    def __init__(self, network: str, lock: IO[str] | None) -> None:
        self.network = network
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file drops its lock
            self._lock = None


def claim_network(requested: str | None = None, claims: Path = CLAIMS) -> NetworkClaim:
    """`requested` as given (the caller chose it), else a free 127.N.0.0/16 claimed for this cluster; `claims`: the
    folder of the machine's claims."""
    if requested is not None:
        return NetworkClaim(requested, None)
    claims.mkdir(parents=True, exist_ok=True)
    for n in random.sample(range(1, 255), 254):
        lock = (claims / f"127.{n}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return NetworkClaim(f"127.{n}.0.0/16", lock)
    raise RuntimeError(f"every loopback /16 is claimed by a running local cluster (locks in {claims})")


__all__ = ["CLAIMS", "NetworkClaim", "claim_network"]
