"""The local cluster's supervision of the processes it starts, as pure steps over a stand-in process:

- a process that exits is said once, restarted after its delay, and said again; the delays double up to their cap;
- the restart count starts again once a process ran long enough;
- `stop_recorded` stops a recorded process that still runs the recorded command, and leaves a reused pid alone.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from stepscope_local.supervision import (
    HEALTHY_AFTER_SECONDS,
    MAX_DELAY_SECONDS,
    Watched,
    check,
    record_pid,
    restart_delay,
    stop_recorded,
)

pytestmark = pytest.mark.unit


def test_an_exit_is_said_restarted_after_its_delay_and_said_again() -> None:
    code: list[int | None] = [None]
    started: list[int] = []

    def restart() -> str:
        started.append(1)
        code[0] = None
        return "pid 42"

    watched = Watched("operator", lambda: code[0], restart)
    assert check(watched, 0.0) is None
    code[0] = -9
    assert check(watched, 10.0) == "# the operator exited with -9; restarting it in 1 s"
    assert check(watched, 10.5) is None and not started
    assert check(watched, 11.0) == "# the operator restarted (restart 1): pid 42"
    code[0] = 1
    assert check(watched, 12.0) == "# the operator exited with 1; restarting it in 2 s"
    assert check(watched, 14.0) == "# the operator restarted (restart 2): pid 42"
    assert check(watched, 14.0 + HEALTHY_AFTER_SECONDS) is None and watched.restarts == 0
    assert [restart_delay(n) for n in range(7)] == [1, 2, 4, 8, 16, MAX_DELAY_SECONDS, MAX_DELAY_SECONDS]


def test_stop_recorded_stops_the_recorded_command_only(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        cmdline = Path(f"/proc/{sleeper.pid}/cmdline")
        end = time.monotonic() + 30
        while b"time.sleep" not in cmdline.read_bytes() and time.monotonic() < end:  # until it has exec'd
            time.sleep(0.05)
        record_pid(tmp_path, "operator", sleeper.pid)
        assert stop_recorded(tmp_path, {"operator": "moto_server"}) == []  # another program on that pid: left alone
        assert sleeper.poll() is None
        record_pid(tmp_path, "operator", sleeper.pid)
        assert stop_recorded(tmp_path, {"operator": "time.sleep"}, grace=5) == [f"operator (pid {sleeper.pid})"]
        end = time.monotonic() + 10
        while sleeper.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        assert sleeper.poll() is not None and not (tmp_path / "pids" / "operator.pid").exists()
    finally:
        sleeper.kill()
        sleeper.wait()
