"""The rank workers' fork server (rank_pool), started as early as a command knows it will use workers.

The fork server is a fresh interpreter that imports the parser and the analyses once (PRELOAD) and then forks a
worker per rank. `stepscope analyze` starts it as it reads the first trace (ranks/pipeline), so that the server's
imports run beside that read on another CPU; a job too small for a pool never starts it. The preload ends by
freezing what it created (preload_frozen): the workers' garbage collector then leaves those shared objects alone,
and the server exits sooner (bench/ranks_vs_hta.py measures both). This module imports nothing heavy itself.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext

from stepscope_analyzer.workers.cpu_quota import worker_count

PRELOAD = [
    "stepscope_analyzer.parse",
    "stepscope_analyzer.analyses",
    "stepscope_analyzer.ranks.trace_work",  # the work the pool sends (by name) and the pool's own types
    "stepscope_analyzer.workers.preload_frozen",  # last: freezes what the others created
]


def context() -> ForkServerContext:
    """The multiprocessing context every rank pool uses: the fork server, preloading the analyses."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_early(ranks_hint: int = 2) -> bool:
    """Start the fork server now when `ranks_hint` ranks would get more than one worker; whether it did. It
    returns at once: the server imports PRELOAD in its own process, and the first fork request waits for that."""
    try:
        if worker_count(ranks_hint) <= 1:
            return False
    except ValueError:  # a malformed worker override: reported where the pool is sized
        return False
    context()
    forkserver.ensure_running()
    return True


__all__ = ["PRELOAD", "context", "start_early"]
