"""Which ranks report.json holds in full. Pure.

A job of at most REPORT_RANKS_IN_FULL analysed ranks (compared in full) keeps every rank. A larger one keeps, up to
REPORT_RANKS_IN_FULL analysed ranks: the ranks the diagnosis names (slow ranks, hangs, the ranks of slow nodes and of
its findings, the ranks set against the median per op type, the ranks that wait most and those they wait for), then
a few peers for the evidence (ranks of the named ranks' nodes, then the ranks nearest the job's median step), and
every rank that was not analysed (the missing ones are listed up to max_listed_missing_ranks already). Every rank's
numbers are in the ranks table beside report.json (ranks.csv.gz).
"""

from __future__ import annotations

from collections.abc import Iterator

from stepscope_contract.report import REPORT_RANKS_IN_FULL, Diagnosis, RankReport, RankStatus

__all__ = ["MEDIAN_PEERS", "NODE_PEERS", "named_ranks", "report_ranks"]

NODE_PEERS = 2
MEDIAN_PEERS = 4


def named_ranks(diagnosis: Diagnosis) -> Iterator[int]:
    """The ranks the diagnosis names, the most telling first (duplicates possible)."""
    yield from (s.rank for s in diagnosis.slow_ranks)
    yield from (h.rank for h in diagnosis.hangs)
    for node in diagnosis.slow_nodes:
        yield from node.ranks
    yield from (t.rank for t in diagnosis.by_op_type if t.rank is not None)
    for w in diagnosis.waits:
        yield w.rank
        yield from (f.rank for f in w.waits_for)
    for finding in diagnosis.findings:
        yield from finding.ranks


def _peers(ok: list[RankReport], named: list[int]) -> Iterator[int]:
    by_rank = {r.rank: r for r in ok}
    for rank in named:
        node = by_rank[rank].node if rank in by_rank else None
        if node:
            yield from [r.rank for r in ok if r.node == node and r.rank != rank][:NODE_PEERS]
    steps = sorted(r.steps.median_us for r in ok)
    middle = steps[len(steps) // 2] if steps else 0.0
    yield from (r.rank for r in sorted(ok, key=lambda r: (abs(r.steps.median_us - middle), r.rank))[:MEDIAN_PEERS])


def report_ranks(ranks: list[RankReport], diagnosis: Diagnosis, *, sampled: bool = False) -> list[RankReport]:
    """The ranks report.json holds in full, in the order of `ranks`."""
    ok = [r for r in ranks if r.status is RankStatus.OK]
    if not sampled and len(ok) <= REPORT_RANKS_IN_FULL:
        return ranks
    present = {r.rank for r in ok}
    keep: list[int] = []
    for rank in [*named_ranks(diagnosis), *_peers(ok, [r for r in named_ranks(diagnosis) if r in present])]:
        if rank in present and rank not in keep:
            keep.append(rank)
        if len(keep) >= REPORT_RANKS_IN_FULL:
            break
    chosen = set(keep)
    return [r for r in ranks if r.status is not RankStatus.OK or r.rank in chosen]
