"""A slow rank whose memory differs from its peers': its peak allocated memory (RankReport.memory, where
profile_memory was on) against the median of the other ranks', as evidence when it differs by more than
DIFFERS_SHARE and MIN_DIFFERENCE_BYTES (a larger batch or sequence, a leak, an extra copy on that rank). Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.report import Diagnosis, Evidence, RankReport

DIFFERS_SHARE = 0.2
MIN_DIFFERENCE_BYTES = 16 * 2**20
MIB = 2**20
LABEL = "peak memory allocated"


def memory_evidence(rank: RankReport, others: list[RankReport]) -> Evidence | None:
    mine = rank.memory
    if mine is None:
        return None
    theirs = [o.memory.peak_allocated_bytes for o in others if o.memory is not None and o.memory.device == mine.device]
    if not theirs:
        return None
    base = median(theirs)
    delta = mine.peak_allocated_bytes - base
    if abs(delta) < max(DIFFERS_SHARE * base, MIN_DIFFERENCE_BYTES):
        return None
    how = f"{mine.peak_allocated_bytes / base:.2f}x" if base > 0 else "none on"
    detail = (
        f"{mine.device.upper()} memory: {mine.peak_allocated_bytes / MIB:,.0f} MiB at its peak, {how} the other "
        f"ranks' median ({base / MIB:,.0f} MiB): this rank holds different data (a larger batch or sequence, an extra "
        "copy, a leak)"
    )
    return Evidence(metric=LABEL, value=mine.peak_allocated_bytes / MIB, baseline=base / MIB, unit="MiB", detail=detail)


def with_memory_evidence(diagnosis: Diagnosis, ranks: list[RankReport]) -> Diagnosis:
    """The diagnosis with the memory evidence of each slow rank whose memory differs from its peers'."""
    by_rank = {r.rank: r for r in ranks}
    slow = []
    for s in diagnosis.slow_ranks:
        rank = by_rank.get(s.rank)
        found = (
            None
            if rank is None or s.cause in STANDSTILL
            else memory_evidence(rank, [r for r in ranks if r is not rank])
        )
        slow.append(s if found is None else s.model_copy(update={"evidence": [*s.evidence, found]}))
    return diagnosis.model_copy(update={"slow_ranks": slow})
