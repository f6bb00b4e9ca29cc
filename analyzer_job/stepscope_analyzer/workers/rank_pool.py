"""Ranks' traces worked on in worker processes, one per usable CPU (cpu_quota): the pool, not the work.

Only the CPU-bound part runs in the workers: a trace's bytes in, its RankReport (or the error text) out, by the
caller's `work` function (ranks.trace_work.compute parses and summarises). Reading
from storage and everything that needs the store stay in the calling process, which reads one trace per worker in
flight and IN_FLIGHT_SPARE more (read and waiting for whichever worker frees first); a task's bytes leave it with
the pickle sent to a worker (Task.again), so its memory holds the stored (gzip) traces no worker has taken yet
while each worker holds one inflated trace at a time, its stored bytes let go once parsed
(Handed): the per-worker peak is the serial path's peak for the largest trace (the imported code, plus the trace's
columns, tens of bytes per kept event, and the decoded events of one 256 KiB chunk: bench/ranks_vs_hta.py prints
the largest process), bounded by the same limits table (limits.py), which the workers receive with every task.
The workers touch no storage.

Workers are forked from the calling process once it has imported what they run (forking.prepare), before the
first trace is read; each pool analyses up to RANKS_PER_WORKER ranks per worker before a fresh pool takes its place
(a quick worker may take more of them than its peers, never more than the pool's). A worker that runs on reuses the
heap pages its earlier ranks faulted in (fewer page faults than a process per rank, at the same peak:
bench/ranks_vs_hta.py); the bound keeps a map shard's hundreds of ranks from growing one process's heap fragments
without limit. A worker sets its own malloc thresholds as it starts (heap.for_worker): it does not keep the
caller's. A worker that dies (killed for memory) breaks the pool: the ranks it was running are then analysed again
one at a time, each in a fresh process, so only the rank that kills its process is marked failed and the others
are still analysed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace

from stepscope_analyzer import limits
from stepscope_analyzer.error_text import error_text
from stepscope_analyzer.workers import forking, heap
from stepscope_analyzer.workers.cpu_quota import cpus_per_trace
from stepscope_contract.report import RankReport

IN_FLIGHT_SPARE = 1
RANKS_PER_WORKER = 16


@dataclass(frozen=True)
class Computed:
    """One trace's summary, or why there is none; `rank` as the trace or file name says (None: unknown)."""

    summary: RankReport | None
    error: str | None
    rank: int | None
    began: float | None = None  # when a worker began it (time.perf_counter: the machine's monotonic clock)


@dataclass
class Task:
    """One trace for the workers; a worker empties its own copy's `trace` as it hands the bytes to the work.

    With `again` (how the caller reads the trace once more), the bytes leave the calling process with the task: the
    pickle sent to a worker takes them out of the task, so the caller holds no copy of a trace a worker has (only the
    one pickled for whichever worker frees first), and a task run again after its worker died reads them anew."""

    index: int
    trace: bytes
    fixed_rank: int | None
    name_rank: int | None
    again: Callable[[], bytes] | None = field(default=None, compare=False)

    def __reduce__(self) -> tuple[type[Task], tuple[int, bytes, int | None, int | None]]:
        trace = self.trace
        if self.again is not None:
            self.trace = b""  # sent: the pickle holds the only copy (pickled in the queue's feeder thread)
        return (Task, (self.index, trace, self.fixed_rank, self.name_rank))

    def with_trace(self) -> Task:
        """This task with its bytes, read again where they were sent away."""
        if self.trace or self.again is None:
            return self
        return replace(self, trace=self.again())


class Handed:
    """A trace's bytes handed over once: whoever takes them holds the only reference, so they are freed as soon as
    it lets them go (a worker's trace, once parsed, before the analyses run), not when the task is done."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def take(self) -> bytes:
        data, self._data = self._data, b""
        return data


Work = Callable[[bytes | Handed, int | None, int | None, int, int | None], Computed]
"""what a worker does with a task: (trace, fixed_rank, name_rank, top_n, cpus) -> Computed; a module-level function
(it is sent to the workers by name), e.g. ranks.trace_work.compute"""


def _in_worker(task: Task, top_n: int, table: limits.Limits, cpus: int | None, work: Work) -> Computed:
    began = time.perf_counter()
    limits.LIMITS = table  # the caller's limits (an override in tests, the Job's environment otherwise)
    handed, task.trace = Handed(task.trace), b""  # this process's copy of the task (the caller keeps its own)
    return replace(work(handed, task.fixed_rank, task.name_rank, top_n, cpus), began=began)


def _executor(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=forking.context(), initializer=heap.for_worker)


def _alone(task: Task, top_n: int, work: Work) -> Computed:
    """One task in a fresh process of its own: a death there is this rank's."""
    try:
        task = task.with_trace()
    except Exception as exc:  # the trace can no longer be read: that is this rank's error
        rank = task.fixed_rank if task.fixed_rank is not None else task.name_rank
        return Computed(None, f"the trace could not be read again after its worker died: {error_text(exc)}", rank)
    with _executor(1) as pool:
        try:
            return pool.submit(_in_worker, task, top_n, limits.current(), None, work).result()  # parse_trace decides
        except BrokenProcessPool:
            rank = task.fixed_rank if task.fixed_rank is not None else task.name_rank
            return Computed(None, "the process analysing this trace died (out of memory?)", rank)


def _pool_run(
    source: Iterator[Task], top_n: int, workers: int, work: Work, beside: _Beside | None
) -> Generator[tuple[int, Computed], None, tuple[list[Task], bool]]:
    """Run tasks from `source` in one pool (at most RANKS_PER_WORKER per worker) until the batch is done or a worker
    dies. Returns the suspects (the tasks in the pool when a worker died, else []) and whether `source` ran out.
    The workers are forked before the first task is read, so none of them starts with a stored trace in its heap.
    `beside` is started once the first tasks are handed to the pool."""
    pending: dict[Future[Computed], Task] = {}
    suspects: list[Task] = []
    handed = 0
    cpus = cpus_per_trace(workers)  # more than one: CPUs to spare for each worker's inflate and scan threads
    with _executor(workers) as pool:
        pool.submit(os.getpid)  # forks every worker now: a fork pool starts them all within its first submit
        while not suspects:
            while len(pending) < workers + IN_FLIGHT_SPARE and handed < workers * RANKS_PER_WORKER:
                task = next(source, None)
                if task is None:
                    break
                handed += 1
                try:
                    pending[pool.submit(_in_worker, task, top_n, limits.current(), cpus, work)] = task
                except BrokenProcessPool:
                    suspects.append(task)
                    break
            if not pending:
                break
            if beside is not None:
                beside.start()
                beside = None
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                try:
                    yield task.index, future.result()
                except BrokenProcessPool:
                    suspects.append(task)
            if suspects:
                suspects += pending.values()
    return suspects, handed < workers * RANKS_PER_WORKER and not suspects


def compute_all(
    tasks: Iterable[Task],
    *,
    work: Work,
    top_n: int,
    workers: int,
    while_waiting: Callable[[], object] | None = None,
) -> Iterator[tuple[int, Computed]]:
    """(task index, result) as they finish; tasks are pulled lazily, at most one per worker and
    IN_FLIGHT_SPARE more.
    `while_waiting`, if given, runs (at most once) on a thread of its own as soon as the workers have their first
    tasks: work of the caller's that no result waits for (`stepscope analyze` imports its reduce step there), while
    this thread goes on handing out the next tasks as results come (run inline, it would keep a worker that finished
    waiting for its next trace until it ends). It is joined before any later fork (a fresh pool, a rank run alone)
    and before this returns, which raises its exception if it failed. The calling process keeps its mmap threshold
    fixed from here on (workers.heap): the stored traces it reads and hands on leave its heap when let go."""
    heap.return_large_frees()  # the workers forked after this set their own (heap.for_worker)
    source = iter(tasks)
    beside = _Beside(while_waiting) if while_waiting is not None else None
    try:
        first = True
        while True:
            run = _pool_run(source, top_n, workers, work, beside if first else None)
            suspects, ran_out = yield from run
            first = False
            if beside is not None:
                beside.join()  # forking.py: no other thread of the caller's runs at a fork
            for task in suspects:
                yield task.index, _alone(task, top_n, work)
            if ran_out:
                return
    finally:
        if beside is not None:
            beside.join()


class _Beside:
    """The caller's `while_waiting`, on a thread of its own; `join` waits for it and raises what it raised."""

    def __init__(self, func: Callable[[], object]) -> None:
        self._func = func
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="stepscope-while-waiting", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._func()
        except BaseException as exc:
            self._error = exc

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error


__all__ = ["Computed", "Handed", "Task", "Work", "compute_all"]
