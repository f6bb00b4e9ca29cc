"""The processes `stepscope local-cluster` starts, watched and started again when they exit, as a Deployment's would
be: the operator (its state is in the API server, so a new one takes its sessions over where the old one left them)
and the object store (moto keeps its objects in memory: a new one on the same port has the buckets again, the
objects a killed one held are lost). Each exit and restart is said on the cluster's log; restarts wait 1, 2, 4 ... up
to MAX_DELAY_SECONDS, the count starting again once a process ran HEALTHY_AFTER_SECONDS.

Each process's pid is kept in `<workdir>/pids/<name>.pid`, so that `--stop` stops what the cluster started even when
the cluster's own process is gone (`stop_recorded`)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_DELAY_SECONDS = 30.0
HEALTHY_AFTER_SECONDS = 60.0
PIDS_DIR = "pids"


def restart_delay(restarts: int) -> float:
    """Seconds before restart number `restarts + 1`: 1, 2, 4, ... up to MAX_DELAY_SECONDS."""
    return min(MAX_DELAY_SECONDS, 2.0 ** min(restarts, 16))


@dataclass
class Watched:
    """One supervised process: `exit_code` is None while it runs, `restart` starts it again and says how (pid,
    port)."""

    name: str
    exit_code: Callable[[], int | None]
    restart: Callable[[], str]
    restarts: int = 0
    due: float | None = None  # time.monotonic() of the pending restart
    started: float = 0.0


def check(watched: Watched, now: float) -> str | None:
    """One look at a supervised process; the line to log when something happened."""
    code = watched.exit_code()
    if code is None:
        if watched.restarts and now - watched.started >= HEALTHY_AFTER_SECONDS:
            watched.restarts = 0
        return None
    if watched.due is None:
        delay = restart_delay(watched.restarts)
        watched.due = now + delay
        return f"# the {watched.name} exited with {code}; restarting it in {delay:g} s"
    if now < watched.due:
        return None
    said = watched.restart()
    watched.restarts += 1
    watched.due = None
    watched.started = now
    return f"# the {watched.name} restarted (restart {watched.restarts}): {said}"


def pid_file(workdir: Path, name: str) -> Path:
    return workdir / PIDS_DIR / f"{name}.pid"


def record_pid(workdir: Path, name: str, pid: int) -> None:
    path = pid_file(workdir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(pid))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stop_recorded(workdir: Path, markers: dict[str, str], grace: float = 10.0) -> list[str]:
    """Stop (SIGTERM, then SIGKILL after `grace`) the process group of every recorded pid that still runs the
    command its name's marker says (a pid reused by another program is left alone); what was stopped, in words."""
    stopped = []
    for name, marker in markers.items():
        path = pid_file(workdir, name)
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
        if marker in _cmdline(pid):
            _stop_group(pid, grace)
            stopped.append(f"{name} (pid {pid})")
        path.unlink(missing_ok=True)
    return stopped


def _stop_group(pid: int, grace: float) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and _cmdline(pid):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
