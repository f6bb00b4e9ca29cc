"""How often each sidecar is asked about a capture in flight: every tick while few are live, and for a large session
POLLS_PER_SECOND asks a tick over all its pods, the least recently asked first, until each pod would wait more than
MAX_GAP_SECONDS (then a 1/MAX_GAP_SECONDS share of them a tick), so the operator's and the sidecars' cost of
waiting stays flat as the session grows. A pod still to be started or not yet verified by this process is always
asked; as pods finish, the share asked grows and the last ones are asked every tick."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime

POLLS_PER_SECOND = 256
MAX_GAP_SECONDS = 4.0
_NEVER = datetime.min.replace(tzinfo=UTC)


def poll_gap(live: int) -> float:
    """Seconds (ticks of one second) between two asks of one pod while `live` pods are in flight."""
    return min(MAX_GAP_SECONDS, live / POLLS_PER_SECOND)


def due_pods(live: list[str], always: set[str], polled: Mapping[str, datetime]) -> list[str]:
    """The live pods to ask this tick, in `live`'s order: those in `always`, and of the others the
    len(live) / poll_gap least recently asked (never asked first)."""
    gap = poll_gap(len(live))
    if gap <= 1.0:
        return list(live)
    budget = math.ceil(len(live) / gap)
    others = sorted((pod for pod in live if pod not in always), key=lambda pod: polled.get(pod, _NEVER))
    chosen = always | set(others[:budget])
    return [pod for pod in live if pod in chosen]
