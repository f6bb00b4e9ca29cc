"""Whether the local operator is serving this cluster, and the lines of its log that say why not.

An answering `/healthz` is not enough: an operator configured for another API server (a previous start's port)
starts its liveness endpoint before its first request fails. The operator serves this cluster once the emulator has
recorded its list or watch of ProfileSessions under its own ServiceAccount (`api.audit`).
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope_local.install import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE
from stepscope_local.kube.identity import service_account_user

if TYPE_CHECKING:
    from stepscope_local.cluster import LocalCluster

TAIL_LINES = 30
WATCHED = "profilesessions"


def answers_healthz(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def watches_sessions(cluster: LocalCluster, user: str) -> bool:
    """The emulator recorded `user` listing or watching ProfileSessions."""
    return any(r.resource == WATCHED and r.verb in ("list", "watch") for r in cluster.api.audit.requests(user))


def wait_operator_ready(
    cluster: LocalCluster, operator: subprocess.Popen[bytes], health_port: int, timeout: float
) -> str | None:
    """None once the operator answers /healthz and has listed or watched ProfileSessions on this cluster; else why
    not, in words (it exited, its /healthz never answered, or it never reached this API server)."""
    user = service_account_user(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)
    deadline = time.monotonic() + timeout
    healthy = reached = False
    while time.monotonic() < deadline:
        if (code := operator.poll()) is not None:
            return f"it exited with status {code}"
        healthy = healthy or answers_healthz(health_port)
        reached = reached or watches_sessions(cluster, user)
        if healthy and reached:
            return None
        time.sleep(0.3)
    if not healthy:
        return f"its /healthz on port {health_port} did not answer within {timeout:.0f} s"
    return f"it made no request to the API server {cluster.api.url} as {user} within {timeout:.0f} s"


def log_tail(path: Path, offset: int = 0, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a log written after `offset` (this start's part of an appended log)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"({path} unreadable: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"
