"""Step telemetry of the hook (stdlib only, Python 3.9+): every step's duration, the time it spent inside
torch.autograd.backward (where DDP waits for its gradient all-reduce) and inside DataLoader iterators, written at each
step boundary into a memory-mapped ring file in the hook dir, which the sidecar reads for its Prometheus metrics and
the operator's triggers.

The layout is stepscope_contract.step_telemetry's (this is a copy: the hook cannot import the contract; a test holds
the two together). The file lives in the volume shared with the sidecar, so a restarted sidecar finds every step the
process recorded. Cost per step: one slot, the counters and one histogram bucket written with struct into the mapped
pages (about half a microsecond, bench/hook_overhead.py); no system call. STEPSCOPE_STEP_TELEMETRY=0 switches it off.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import mmap
import os
import struct
import sys
import tempfile
import time
from typing import Any, Callable, List, Optional

ENV_SWITCH = "STEPSCOPE_STEP_TELEMETRY"
TELEMETRY_DIR = "telemetry"
RING_SUFFIX = ".steps"
MAGIC = b"STEPSCP1"
VERSION = 1
HEADER_SIZE = 512
CAPACITY = 4096
HISTOGRAM_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0)
HEADER_FIXED = struct.Struct("<8sIIIIiiqd")
COUNTERS_OFFSET = 48
COUNTERS = struct.Struct("<Qdd")
CLOSED_OFFSET = 72
CLOSED = struct.Struct("<I")
BUCKETS_OFFSET = 80
BUCKET = struct.Struct("<Q")
SLOT = struct.Struct("<QdfffI")
SLOT_SIZE = SLOT.size
FLAG_PROFILED = 1

_DATALOADER_ITER = "torch.utils.data.dataloader"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


class StepRecorder:
    """One process's ring file; `record` is called by the training thread at each step boundary."""

    def __init__(self, hook_dir: str, rank: int, world_size: int, capacity: int = CAPACITY) -> None:
        folder = os.path.join(hook_dir, TELEMETRY_DIR)
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, "rank-%d%s" % (rank, RING_SUFFIX))
        self.capacity = capacity
        size = HEADER_SIZE + capacity * SLOT_SIZE
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        try:
            os.ftruncate(fd, size)
            self._mm = mmap.mmap(fd, size)  # MAP_SHARED: the sidecar sees every write
            HEADER_FIXED.pack_into(
                self._mm,
                0,
                MAGIC,
                VERSION,
                HEADER_SIZE,
                capacity,
                SLOT_SIZE,
                rank,
                world_size,
                os.getpid(),
                time.time(),
            )
            os.replace(tmp, self.path)  # readers never see a file without its header
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        finally:
            os.close(fd)
        self._wall_offset = time.time() - time.monotonic()
        self._previous: Optional[float] = None
        self.count = 0
        self._sum = 0.0
        self._buckets: List[int] = [0] * (len(HISTOGRAM_BOUNDS) + 1)
        self.backward_s = 0.0
        self.data_wait_s = 0.0
        self.closed = False

    def start(self, now: float) -> None:
        """The first step boundary: the next one ends the first recorded step."""
        self._previous = now
        self.backward_s = 0.0
        self.data_wait_s = 0.0

    def record(self, now: float, profiled: bool) -> None:
        """A step boundary at `now` (time.monotonic): the step since the previous boundary."""
        previous = self._previous
        self._previous = now
        if previous is None or self.closed:
            return
        duration = now - previous
        seq = self.count
        ended = now + self._wall_offset
        SLOT.pack_into(
            self._mm,
            HEADER_SIZE + (seq % self.capacity) * SLOT_SIZE,
            seq,
            ended,
            duration,
            self.backward_s,
            self.data_wait_s,
            FLAG_PROFILED if profiled else 0,
        )
        self.backward_s = 0.0
        self.data_wait_s = 0.0
        self.count = seq + 1
        self._sum += duration
        COUNTERS.pack_into(self._mm, COUNTERS_OFFSET, seq + 1, ended, self._sum)
        index = bisect.bisect_left(HISTOGRAM_BOUNDS, duration)
        self._buckets[index] += 1
        BUCKET.pack_into(self._mm, BUCKETS_OFFSET + BUCKET.size * index, self._buckets[index])

    def close(self, reason: int = 1) -> None:
        """The process exits (1) or its hook switched off (2): the series stops, and that is not a stall."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            CLOSED.pack_into(self._mm, CLOSED_OFFSET, reason)

    def instrument(self) -> None:
        """Make this recorder the one the timed backward and DataLoader iterators add to. Never raises."""
        _Timing.recorder = self
        _Timing.install()


class _Timing:
    """torch.autograd.backward (Tensor.backward calls it) and DataLoader iterators' __next__, wrapped once per process
    to add the wall time of their outermost calls to the current recorder's step."""

    recorder: Optional[StepRecorder] = None
    depth = 0

    @classmethod
    def wrap(cls, original: Callable[..., Any], attribute: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            recorder = cls.recorder
            if recorder is None or cls.depth:
                return original(*args, **kwargs)
            cls.depth = 1
            began = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                cls.depth = 0
                setattr(recorder, attribute, getattr(recorder, attribute) + time.monotonic() - began)

        functools.update_wrapper(timed, original)
        timed.__dict__["_stepscope_timed"] = True
        return timed

    @classmethod
    def install(cls) -> None:
        with contextlib.suppress(Exception):
            autograd = getattr(sys.modules.get("torch"), "autograd", None)
            original = getattr(autograd, "backward", None)
            if original is not None and not getattr(original, "_stepscope_timed", False):
                autograd.backward = cls.wrap(original, "backward_s")  # type: ignore[union-attr]
        with contextlib.suppress(Exception):
            base = getattr(sys.modules.get(_DATALOADER_ITER), "_BaseDataLoaderIter", None)
            original = getattr(base, "__next__", None)
            if original is not None and not getattr(original, "_stepscope_timed", False):
                base.__next__ = cls.wrap(original, "data_wait_s")  # type: ignore[union-attr]


def open_recorder(hook_dir: str, rank: int, world_size: int, now: float) -> Optional[StepRecorder]:
    """The process's recorder, started at `now` and timing backward and data loading; None when switched off or
    when the file cannot be made (telemetry is never worth failing the training for)."""
    if not enabled():
        return None
    try:
        recorder = StepRecorder(hook_dir, rank, world_size)
    except Exception:
        return None
    recorder.start(now)
    recorder.instrument()
    return recorder
