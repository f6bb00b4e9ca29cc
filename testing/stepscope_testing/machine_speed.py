"""How fast this machine is, measured while a test runs, so timing tests judge against it and not a fixed figure.

On a shared machine another process can take the cores for a while: a balanced training job then really is slower
for that while, and a detector of step-time regressions rightly sees it. `SpeedProbe` times one fixed piece of CPU
work a few times a second in a thread; `slowdown(recent, baseline)` says how much slower the machine itself was in a
recent window than in the one before, and `explained(job_ratio, machine_ratio)` whether that accounts for a job's
slowdown (the machine got at least half as much slower as the job did: a job of several processes on two cores slows
more than one thread does).
"""

from __future__ import annotations

import statistics
import threading
import time
from types import TracebackType

WORK = 50_000  # iterations of the timed loop: about 3 ms on an idle core


def _work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


class SpeedProbe:
    """Context manager: samples (monotonic time at the end, seconds taken) of the fixed work every `period` s."""

    def __init__(self, period: float = 0.25, work: int = WORK) -> None:
        self.period = period
        self.work = work
        self._samples: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="speed-probe", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            _work(self.work)
            took = time.perf_counter() - began
            with self._lock:
                self._samples.append((time.monotonic(), took))
            self._stop.wait(self.period)

    def __enter__(self) -> SpeedProbe:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(10)

    def samples(self) -> list[tuple[float, float]]:
        with self._lock:
            return list(self._samples)

    def slowdown(
        self, recent: tuple[float, float], baseline: tuple[float, float], span: float | None = None
    ) -> float | None:
        """Median time of the work in `recent` over its median in `baseline` (monotonic [start, end] windows); with
        `span`, the slowest `span`-long stretch of `recent` (a brief spike the job's few recent steps fell into).
        None when a window holds no sample."""
        return slowdown(self.samples(), recent, baseline, span)


def slowdown(
    samples: list[tuple[float, float]],
    recent: tuple[float, float],
    baseline: tuple[float, float],
    span: float | None = None,
) -> float | None:
    def within(window: tuple[float, float]) -> list[float]:
        return [took for at, took in samples if window[0] <= at <= window[1]]

    before = within(baseline)
    stretches = [recent]
    if span is not None and span < recent[1] - recent[0]:
        stretches = [(at - span, at) for at, _ in samples if recent[0] + span <= at <= recent[1]] or [recent]
    medians = [statistics.median(now) for now in map(within, stretches) if now]
    if not medians or not before:
        return None
    return max(medians) / statistics.median(before)


def explained(job_ratio: float, machine_ratio: float) -> bool:
    """A job's slowdown (its time over its baseline) is the machine's when the machine slowed at least half as much."""
    return machine_ratio - 1.0 >= (job_ratio - 1.0) / 2.0
