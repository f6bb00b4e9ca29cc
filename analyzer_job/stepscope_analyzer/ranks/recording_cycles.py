"""Successive recording cycles of one rank in a plain folder. Pure.

A torch.profiler schedule with `repeat` (or repeat=0: every cycle until the job ends) writes one trace per rank per
cycle, each with the same rank in its distributedInfo (and, through tensorboard_trace_handler, named
`<worker>.<time>.pt.trace.json[.gz]` with the same worker name, host and pid by default: that names the process
of a trace without a rank). Traces of one rank (or one worker) from one job (same job fingerprint) whose recorded
steps follow one another in time, from one process (the same worker name) or, when the file names do not say,
within a minute, are such cycles: the latest full cycle of each rank is analysed (the same steps on every rank, the
job as it runs now) and the others are left out with a note, instead of being renumbered as ranks of their own.
A cycle with fewer recorded steps than the rank's longest is one the profiler's end cut short (repeat=0 with the
training loop ending mid-cycle writes a last trace of a step or two): the latest cycle with the most steps is the
one analysed. Traces of one rank whose recordings overlap are two processes claiming one rank: not cycles.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Hashable

from stepscope_contract.report import RankReport

_HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.\d+\.pt\.trace\.json(?:\.gz)?$")

OVERLAP_S = 0.05
"""a cycle may start this long before the previous one ended (clock rounding) and still follow it"""
MAX_GAP_S = 60.0
"""without worker names to say the traces come from one process, a cycle follows the previous one within this
long (a recording of the same ranks much later is another run of the job: job_groups tells it apart)"""


def _steps_text(r: RankReport) -> str:
    numbers = r.steps.numbers
    if numbers:
        return f"ProfilerStep #{numbers[0]}-#{numbers[-1]}" if len(numbers) > 1 else f"ProfilerStep #{numbers[0]}"
    return f"{r.steps.count} steps"


def _cycles(group: list[tuple[int, RankReport]]) -> bool:
    """The traces of one rank, in time order, come from one job and follow one another: from one process (the same
    worker name in their file names), or within MAX_GAP_S when the names do not say."""
    if len({r.job_fingerprint for _, r in group}) != 1:
        return False
    for (_, a), (_, b) in itertools.pairwise(group):
        if a.captured_to_unix_s is None or b.captured_from_unix_s is None:
            return False
        if b.captured_from_unix_s < a.captured_to_unix_s - OVERLAP_S:
            return False
        workers = worker_of(a.trace_uri or ""), worker_of(b.trace_uri or "")
        if None in workers and b.captured_from_unix_s - a.captured_to_unix_s > MAX_GAP_S:
            return False
        if None not in workers and workers[0] != workers[1]:
            return False
    return True


def worker_of(file_name: str) -> str | None:
    """The worker name of a tensorboard_trace_handler file ('host_1234' of 'host_1234.1795.pt.trace.json.gz')."""
    match = _HANDLER_NAME.match(file_name.rsplit("/", 1)[-1])
    return match.group("worker") if match else None


def cycles_left_out(summaries: list[tuple[int, Hashable, RankReport]]) -> dict[int, str]:
    """For (index, whose, summary) of analysed traces, `whose` saying which process recorded it (its rank, or its
    worker name when the trace has no rank): index -> note, for each trace that is a recording cycle of a process
    other than the one kept (its latest cycle with the most steps)."""
    by_process: dict[Hashable, list[tuple[int, RankReport]]] = defaultdict(list)
    for index, whose, r in summaries:
        by_process[whose].append((index, r))
    out: dict[int, str] = {}
    for whose, group in by_process.items():
        if len(group) < 2 or any(r.captured_from_unix_s is None for _, r in group):
            continue
        group.sort(key=lambda item: item[1].captured_from_unix_s or 0.0)
        if not _cycles(group):
            continue
        most = max(r.steps.count for _, r in group)
        keep = max(pos for pos, (_, r) in enumerate(group) if r.steps.count == most)
        kept = group[keep][1]
        who = f"rank {whose}" if isinstance(whose, int) else f"worker {whose}"
        for pos, (index, r) in enumerate(group):
            if pos < keep:
                out[index] = (
                    f"{r.trace_uri or 'a trace'}: an earlier recording cycle of {who} ({_steps_text(r)}); "
                    f"the latest {'full ' if keep < len(group) - 1 else ''}cycle ({_steps_text(kept)}) is analysed"
                )
            elif pos > keep:
                out[index] = (
                    f"{r.trace_uri or 'a trace'}: a recording cycle of {who} cut short ({_steps_text(r)}: fewer steps "
                    f"than its cycle of {most}, the profiling ended mid-cycle); the latest full cycle "
                    f"({_steps_text(kept)}) is analysed"
                )
    return out
