"""Python stacks of the training thread, sampled while the steps are recorded (stdlib only, Python 3.9+).

A daemon thread reads `sys._current_frames()` `hz` times a second and counts each distinct stack of the thread
that reaches the step boundaries; no ptrace, no signal, nothing in the training script. A sample counts the sampling
periods that elapsed since the previous one (at most MAX_WEIGHT_S of them): the thread needs the GIL to take a
sample, which a CPU-bound Python loop hands over only every switch interval and a process starved of CPU gets late,
so samples in such code come further apart than in code that sleeps or waits in C; counted by time, the counts
stand for the time spent in each stack, not for how often the sampler got in. At the end of the window
the counts are written in the folded format (stepscope_contract.python_stacks declares it and the caps below,
which tests/sidecar/hook/test_sampler.py holds against that module): the MAX_STACKS most sampled stacks, the
innermost MAX_FRAMES frames of each, every frame's text cut to MAX_FRAME_CHARS.

Its cost per step, as a ratio of step time at several rates, is measured by bench/hook_overhead.py.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from types import FrameType
from typing import Dict, List, Optional, Tuple

from ._files import write_text_atomic

HEADER_PREFIX = "# stepscope-python-stacks "
MAX_STACKS = 400
MAX_FRAMES = 48
MAX_FRAME_CHARS = 160
MAX_HZ = 1000
MAX_FUNC_CHARS = 80
MAX_PATH_CHARS = 64
ROOT_CUT = "[deeper frames cut]"
MAX_DISTINCT = 20000  # stacks counted in memory; a sample of one more distinct stack counts as dropped
SAMPLER_THREAD = "stepscope-sampler"
JOIN_S = 0.02
MAX_WEIGHT_S = 0.5  # a sample stands for at most this much time (a suspended process's gap is not one stack's)

_Code = Tuple[str, str, int]  # (function, file, line)
_MARKERS = ("site-packages/", "dist-packages/")
_frame_texts: Dict[_Code, str] = {}


def short_path(path: str) -> str:
    """A file path as a frame shows it: below site-packages for libraries, else its last two parts."""
    path = path.replace("\\", "/")
    for marker in _MARKERS:
        at = path.rfind(marker)
        if at >= 0:
            return path[at + len(marker) :]
    return "/".join(path.split("/")[-2:])


def frame_text(code: _Code) -> str:
    """`function (path:line)`, without ';' or line breaks, at most MAX_FRAME_CHARS characters (long function names
    and paths are cut, the line number stays)."""
    text = _frame_texts.get(code)
    if text is None:
        func, path, line = code
        path = short_path(path)
        if len(func) > MAX_FUNC_CHARS:  # the line stays: cut the names, the function's end, the path's start
            func = func[: MAX_FUNC_CHARS - 1] + "…"
        if len(path) > MAX_PATH_CHARS:
            path = "…" + path[-(MAX_PATH_CHARS - 1) :]
        text = "%s (%s:%d)" % (func, path, line)
        text = text.replace(";", ":").replace("\n", " ").replace("\r", " ")[:MAX_FRAME_CHARS]
        if len(_frame_texts) < 100000:
            _frame_texts[code] = text
    return text


def _stack_of(frame: Optional[FrameType]) -> Tuple[object, ...]:
    """The innermost MAX_FRAMES + 1 frames, innermost first, flat: function, file, line of each (one frame more than
    kept: says whether the root was cut). Flat and of strings, whose hashes Python caches: a cheap dictionary key."""
    out: List[object] = []
    n = 0
    while frame is not None and n <= MAX_FRAMES:
        code = frame.f_code
        out += (code.co_name, code.co_filename, frame.f_lineno)
        frame = frame.f_back
        n += 1
    return tuple(out)


def _codes(stack: Tuple[object, ...]) -> List[_Code]:
    """The (function, file, line) of each frame of a flat stack, innermost first."""
    return [(str(stack[i]), str(stack[i + 1]), int(stack[i + 2])) for i in range(0, len(stack), 3)]  # type: ignore[call-overload]


class StackSampler:
    """Counts the stacks of one thread from a daemon thread of its own, between start() and stop()."""

    def __init__(self, hz: int, thread_id: int) -> None:
        self.hz = max(1, min(int(hz), MAX_HZ))
        self.thread_id = thread_id
        self.counts: Dict[Tuple[object, ...], int] = {}
        self.ticks = 0  # sampling periods counted (the sum of the counts and `dropped`)
        self.samples = 0  # samples taken
        self.dropped = 0
        self.started_at = 0.0
        self.stopped_at = 0.0
        self.cpu_s = 0.0  # the sampling thread's own CPU time, once it has stopped (bench/hook_overhead.py)
        self._stopping = False
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=SAMPLER_THREAD, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling: the thread takes no sample after its current sleep; the training thread waits for it at
        most JOIN_S (the counts are copied whole when folded, so a sample still being counted cannot disturb them)."""
        self._stopping = True
        self.stopped_at = time.monotonic()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_S)

    def _run(self) -> None:
        period = 1.0 / self.hz
        most = max(1.0, MAX_WEIGHT_S * self.hz)  # periods one sample may stand for
        sleep = time.sleep  # a plain sleep: an Event's timed wait costs several times the sample itself
        clock = time.monotonic
        frames = sys._current_frames
        tid = self.thread_id
        counts = self.counts
        began = time.thread_time()
        last = clock()
        owed = 0.0  # periods elapsed and not yet counted (the fraction of one carries to the next sample)
        while True:
            sleep(period)
            if self._stopping:
                break
            frame = frames().get(tid)
            now = clock()
            owed = min(owed + (now - last) / period, most)
            last = now
            if frame is None:
                owed = 0.0
                continue
            weight = int(owed)
            if weight < 1:
                continue
            owed -= weight
            stack = _stack_of(frame)
            self.samples += 1
            self.ticks += weight
            if stack in counts:
                counts[stack] += weight
            elif len(counts) < MAX_DISTINCT:
                counts[stack] = weight
            else:
                self.dropped += weight
        self.cpu_s = time.thread_time() - began

    def folded(self, steps: int) -> str:
        """The header and the MAX_STACKS most sampled stacks, root first (samples beyond them: `dropped`)."""
        merged: Dict[str, int] = {}
        for flat, n in list(self.counts.items()):
            stack = _codes(flat)
            texts = [frame_text(c) for c in reversed(stack[:MAX_FRAMES])]
            if len(stack) > MAX_FRAMES:
                texts.insert(0, ROOT_CUT)
            key = ";".join(texts)
            merged[key] = merged.get(key, 0) + n
        ranked = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))
        kept = ranked[:MAX_STACKS]
        dropped = self.dropped + sum(n for _, n in ranked[MAX_STACKS:])
        window_ms = max((self.stopped_at or time.monotonic()) - self.started_at, 0.0) * 1000.0
        header = {"hz": self.hz, "ticks": self.ticks, "windowMs": round(window_ms, 3), "steps": steps,
                  "dropped": dropped, "samples": self.samples}  # fmt: skip
        lines = [HEADER_PREFIX + json.dumps(header, separators=(", ", ": "))]
        lines.extend("%s %d" % kv for kv in kept)
        return "\n".join(lines) + "\n"

    def write(self, path: str, steps: int) -> None:
        write_text_atomic(path, self.folded(steps))
