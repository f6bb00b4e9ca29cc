"""How the rank workers start (rank_pool): forked from the process that hands them ranks, once that process has
imported what a worker runs.

`prepare` imports the parser and the analyses (PRELOAD) in the calling process, builds the validators of the models
a worker constructs (the contract's models build theirs on first use: contract.deferred), and freezes what exists then
(`gc.freeze`, as the gc module's documentation advises before fork() without exec()): the workers forked from it
start with every module loaded, and their garbage collector never walks (and so never writes to, page by page) the
objects they share with it. The caller needs most of PRELOAD itself (numpy and the report models for the reduce), so
the workers cost no interpreter start and no second import of them, and no process serves the forks. A job of fewer
than POOL_MIN_RANKS traces to parse has no pool (pool_size) and imports nothing here. bench/ranks_vs_hta.py measures
the pool's start and the workers' time.

Workers are forked only from the thread that hands out ranks, with no other thread of the caller's running (the
node summaries' readers have finished by then), and a worker runs only the parse and the analyses.
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing
from multiprocessing.context import BaseContext

from stepscope_analyzer.gc_pause import paused
from stepscope_analyzer.workers.cpu_quota import worker_count, workers_forced

POOL_MIN_RANKS = 3
"""fewer traces are parsed in the command's process (bench/ranks_vs_hta.py --ranks 2 measures both), on every CPU
(parse_trace's threads), where they finish before a pool would have started, unless the worker count is forced"""
PRELOAD = (
    "stepscope_analyzer.parse",
    "stepscope_analyzer.analyses",
    "stepscope_analyzer.ranks.trace_work",  # the work the pool sends (by name) and the pool's own types
)
"""numpy.ma is not among them: a rank's analysis never imports it (analyses.sorted_values); the reduce step's
import loads it beside the workers."""


def context() -> BaseContext:
    """The multiprocessing context every rank pool uses: fork, from a prepared process (`prepare`)."""
    prepare()
    return multiprocessing.get_context("fork")


def pool_size(traces: int) -> int:
    """Worker processes for `traces` traces to parse: 1 (the command's own process, no pool) below POOL_MIN_RANKS
    unless the count is forced, else the usable CPUs (cpu_quota.worker_count). A malformed override raises
    ValueError."""
    if traces < POOL_MIN_RANKS and not workers_forced():
        return 1
    return worker_count(traces)


_prepared = False


def prepare() -> None:
    """Import PRELOAD here (the collector paused: gc_pause) and freeze every object alive, once per process."""
    global _prepared  # noqa: PLW0603 - once per process, whichever caller comes first
    if _prepared:
        return
    with paused():
        for name in PRELOAD:
            importlib.import_module(name)
        from stepscope_contract.deferred import build_now
        from stepscope_contract.report import RankReport

        build_now(RankReport)  # the models a worker constructs, built once here (first use, in each worker, else)
    gc.freeze()
    _prepared = True


__all__ = ["POOL_MIN_RANKS", "PRELOAD", "context", "pool_size", "prepare"]
