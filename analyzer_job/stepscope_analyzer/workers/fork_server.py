"""The rank workers' fork server (rank_pool), started as early as a command knows it will use workers.

The fork server is a fresh interpreter that imports the parser and the analyses once (PRELOAD) and then forks a
worker per rank. `stepscope analyze` starts it as soon as its traces are found, before it imports the rest of the
command (commands/analyze_command), so that the server's imports run beside the command's on another CPU; the
pipeline asks again as it reads the first trace (a no-op once it runs). A job of fewer than POOL_MIN_RANKS traces to
parse has no pool (pool_size) and never starts it. The preload ends by
freezing what it created (preload_frozen): the workers' garbage collector then leaves those shared objects alone,
and the server exits sooner (bench/ranks_vs_hta.py measures both). This module imports nothing heavy itself.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext

from stepscope_analyzer.workers.cpu_quota import worker_count, workers_forced

POOL_MIN_RANKS = 3
"""fewer traces are parsed in the command's process (bench/ranks_vs_hta.py --ranks 2 measures both), on every CPU
(parse_trace's threads), where they finish before a pool would have started, unless the worker count is forced"""
PRELOAD = [
    "stepscope_analyzer.parse",
    "stepscope_analyzer.analyses",
    "stepscope_analyzer.ranks.trace_work",  # the work the pool sends (by name) and the pool's own types
    "numpy.ma",  # numpy.median imports it on its first call: once here rather than in every worker
    "stepscope_analyzer.workers.preload_frozen",  # last: freezes what the others created
]


def context() -> ForkServerContext:
    """The multiprocessing context every rank pool uses: the fork server, preloading the analyses."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def pool_size(traces: int) -> int:
    """Worker processes for `traces` traces to parse: 1 (the command's own process, no pool) below POOL_MIN_RANKS
    unless the count is forced, else the usable CPUs (cpu_quota.worker_count). A malformed override raises
    ValueError."""
    if traces < POOL_MIN_RANKS and not workers_forced():
        return 1
    return worker_count(traces)


def start_early(traces: int = 2) -> bool:
    """Start the fork server now when `traces` traces would be parsed by more than one worker (pool_size); whether
    it did. It returns at once: the server imports PRELOAD in its own process, and the first fork request waits for
    that."""
    try:
        if pool_size(traces) <= 1:
            return False
    except ValueError:  # a malformed worker override: reported where the pool is sized
        return False
    context()
    forkserver.ensure_running()
    return True


__all__ = ["POOL_MIN_RANKS", "PRELOAD", "context", "pool_size", "start_early"]
