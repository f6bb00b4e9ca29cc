"""Per-rank, per-step quantities the diagnosis compares. Pure.

Ranks are compared per recorded step when every rank recorded steps (ranks may capture different counts),
otherwise over the whole captured window.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_contract.report import RankReport

METRICS = ("compute", "host", "memory", "communication", "wait")
"""compute: busy time; host: idle time of the rank's timeline (host-side stalls: input pipeline, data loading,
CPU), which holds the gaps before work starts; memory: memory copies/sets; communication: time inside
collectives not spent waiting for a peer; wait: time waiting inside collectives.

When the summaries carry no wait measure (collective_wait_time 0 everywhere), it is estimated: collectives
synchronise the ranks, so the rank that arrives last spends the least time inside them, and every rank's time
beyond that minimum is waiting: wait_r = comm_r - min(comm), own communication = min(comm)."""


@dataclass(frozen=True)
class RankMetrics:
    rank: int
    node: str | None
    step_us: float
    values: dict[str, float]


def _window_us(r: RankReport) -> float:
    parts = r.compute_time + r.non_compute_time + r.idle_time
    return max(r.kernel_time, parts)


def per_step_divisor(ranks: list[RankReport]) -> dict[int, float]:
    """Steps per rank when every rank recorded steps; 1 for all otherwise."""
    if ranks and all(r.steps.count > 0 for r in ranks):
        return {r.rank: float(r.steps.count) for r in ranks}
    return {r.rank: 1.0 for r in ranks}


def rank_metrics(r: RankReport, divisor: float, wait_us: float | None = None) -> RankMetrics:
    wait = r.collective_wait_time if wait_us is None else wait_us
    own_comm = max(r.communication_time - wait, 0.0)
    values = {
        "compute": r.compute_time / divisor,
        "host": max(r.idle_time, r.host_gap_time) / divisor,
        "memory": r.memory_time / divisor,
        "communication": own_comm / divisor,
        "wait": wait / divisor,
    }
    step = r.steps.median_us if r.steps.count > 0 and r.steps.median_us > 0 else _window_us(r) / divisor
    return RankMetrics(rank=r.rank, node=r.node, step_us=step, values=values)


def wait_is_measured(ranks: list[RankReport]) -> bool:
    return any(r.collective_wait_time > 0 for r in ranks)


def all_metrics(ranks: list[RankReport]) -> list[RankMetrics]:
    divisors = per_step_divisor(ranks)
    if wait_is_measured(ranks) or not ranks:
        return [rank_metrics(r, divisors[r.rank]) for r in ranks]
    per_step_comm = {r.rank: r.communication_time / divisors[r.rank] for r in ranks}
    floor = min(per_step_comm.values())
    return [rank_metrics(r, divisors[r.rank], (per_step_comm[r.rank] - floor) * divisors[r.rank]) for r in ranks]
