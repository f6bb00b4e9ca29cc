"""Per recorded step, how long the training thread ran on a CPU and how long it waited for one (stdlib only).

Linux keeps three numbers per thread in /proc/thread-self/schedstat: nanoseconds on a CPU, nanoseconds waiting on
a run queue (runnable, but every CPU it may use was busy) and the number of timeslices. Read at each ProfilerStep
span's open and close on the training thread, their differences are the step's CPU time and CPU wait: a direct
measure of the contention the analyzer otherwise infers from stretched op calls. Where the file cannot be read
(not Linux, an old kernel, a sandbox) nothing is recorded and the analyzer falls back to its inference.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

PATH = "/proc/thread-self/schedstat"
METADATA_KEY = "stepscopeCpu"


def read(path: str = PATH) -> Optional[Tuple[int, int]]:
    """(ns on a CPU, ns waiting for a CPU) of the calling thread, or None."""
    try:
        with open(path, "rb") as f:
            return _parse(f.read())
    except OSError:
        return None


def _parse(text: bytes) -> Optional[Tuple[int, int]]:
    parts = text.split()
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


class StepCpu:
    """The CPU time and CPU wait of each step span, from its open to its close, in µs.

    The file is opened once and re-read with pread (a /proc file is regenerated at offset 0):
    a few microseconds per read
    (bench/hook_overhead.py measures the hook's cost per step)."""

    def __init__(self, path: str = PATH) -> None:
        self._path = path
        self._fd: Optional[int] = None
        self._failed = False
        self._opened: Optional[Tuple[int, int]] = None
        self.steps: List[List[int]] = []

    def _read(self) -> Optional[Tuple[int, int]]:
        if self._failed:
            return None
        try:
            if self._fd is None:
                self._fd = os.open(_own_thread(self._path), os.O_RDONLY)
            return _parse(os.pread(self._fd, 256, 0))
        except OSError:
            self._failed = True
            return None

    def opened(self) -> None:
        self._opened = self._read()

    def closed(self, index: int) -> None:
        now, then = self._read(), self._opened
        self._opened = None
        if now is not None and then is not None:
            self.steps.append([index, max(now[0] - then[0], 0) // 1000, max(now[1] - then[1], 0) // 1000])

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def metadata(self) -> Dict[str, Any]:
        """The trace's `stepscopeCpu` block: [step index, µs on a CPU, µs waiting for a CPU] per step."""
        return {"source": "schedstat", "columns": ["step", "cpu_us", "cpu_wait_us"], "steps": self.steps}


def _own_thread(path: str) -> str:
    """thread-self names whichever thread opens it: pin it to the calling (training) thread by its id."""
    if path == PATH:
        return "/proc/self/task/%d/schedstat" % threading.get_native_id()
    return path
