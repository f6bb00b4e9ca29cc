"""A tensor-parallel group held back by one of its ranks. Pure.

Tensor parallelism splits every layer over the ranks of a TP group, which meet in a collective in every layer: a
rank that computes more than its peers (found by diagnosis.peers) holds its whole group back many times per step,
and its group-mates' waiting shows in their blocked time. Such a slow rank is also named as a TP-group straggler,
with its group, its group-mates' time blocked per step against the other ranks', and its excess as the gain.
"""

from __future__ import annotations

import numpy as np

from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Cause, Evidence, JobFinding, RankReport, SlowRank


def _blocked_per_step(r: RankReport) -> float:
    if r.step_phases:
        return float(np.median([p.communication_wait for p in r.step_phases]))
    return r.communication_time / max(r.steps.count, 1)


def tp_stragglers(layout: Layout | None, slow: list[SlowRank], ranks: list[RankReport]) -> list[JobFinding]:
    """A finding for each compute-slow rank of a TP group of two ranks or more."""
    if layout is None or layout.tp < 2:
        return []
    blocked = {r.rank: _blocked_per_step(r) for r in ranks}
    out = []
    for s in slow:
        group = next((g for g in layout.tp_groups if s.rank in g), None)
        if s.cause is not Cause.COMPUTE or group is None:
            continue
        mates = [m for m in group if m != s.rank and m in blocked]
        others = [v for r, v in blocked.items() if r not in group]
        if not mates or not others:
            continue
        waiting, elsewhere = median([blocked[m] for m in mates]), median(others)
        members = format_rank_set(list(group))
        evidence = Evidence(metric="TP group-mates blocked per step", value=waiting, baseline=elsewhere,
                            detail=f"rank {format_rank_set(mates)} (its TP group) blocked {waiting / 1000:,.1f} ms per "
                            f"step, the other ranks {elsewhere / 1000:,.1f} ms")  # fmt: skip
        out.append(
            JobFinding(
                cause=Cause.TP_STRAGGLER,
                summary=f"rank {s.rank} holds its tensor-parallel group (rank {members}) back in every layer's "
                f"collectives: +{s.excess_us / 1000:,.1f} ms of compute per step against its peers",
                ranks=list(group),
                gain_us=s.excess_us,
                remedy=cause_row(Cause.TP_STRAGGLER).next_step.format(r=s.rank),
                evidence=[evidence],
            )
        )
    return out
