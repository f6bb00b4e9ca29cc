"""One rank's CPU-bound work: its trace's bytes parsed and summarised into a RankReport (or the error text). Run in
the rank workers (workers.rank_pool), in the calling process for a small job, and on the nodes (node_summaries)."""

from __future__ import annotations

from stepscope_analyzer.error_text import error_text
from stepscope_analyzer.workers.rank_pool import Computed, Handed


def compute(
    trace: bytes | Handed, fixed_rank: int | None, name_rank: int | None, top_n: int, cpus: int | None = None
) -> Computed:
    """Parse and summarise one trace on `cpus` CPUs (None: every usable one; more than one: parse_trace's inflate
    and scan threads, summarize_parsed's phases thread); any failure is the rank's error text, never an exception.
    A handed trace's bytes are let go once parsed: the analyses' peak does not hold them."""
    # imported here, not with this module: the workers' preload (workers/forking) or this call loads them, and a
    # job with nothing to parse never does
    from stepscope_analyzer.analyses import summarize_parsed
    from stepscope_analyzer.parse import parse_trace

    rank = fixed_rank if fixed_rank is not None else name_rank
    raw = trace.take() if isinstance(trace, Handed) else trace
    try:
        parsed = parse_trace(raw, inflate_thread=None if cpus is None else cpus > 1, scan_threads=cpus)
        del raw
        if fixed_rank is None and parsed.rank is not None:
            rank = parsed.rank
        summary = summarize_parsed(parsed, rank=rank if rank is not None else 0, top_n=top_n, threads=cpus)
    except Exception as exc:  # a bad rank never stops the others
        return Computed(None, error_text(exc), rank)
    return Computed(summary, None, rank)


__all__ = ["compute"]
