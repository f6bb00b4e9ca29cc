"""Mixture-of-experts expert imbalance: the ranks holding hot experts get more tokens. Pure.

In an expert-parallel group the ranks exchange tokens in all-to-all collectives (dispatch to the experts, combine
back), which complete when their last rank arrives. A rank whose experts are routed more tokens receives and sends
more in them and computes longer; the group's other ranks wait for it inside the all-to-all. Read from the traces:
the all-to-all collectives each rank recorded (by the collective's name in the call's args or the op's own name),
their elements sent and received (`In/Out msg nelems`) and their time. A group where some ranks exchange
`SKEW` x the group's median elements or more, compute more than its median, and spend less time in the all-to-all
than the others (the others wait for them) has an expert imbalance; its hot ranks are not slow workers (their
extra compute is the routing's), and the gain is a replay of the group's steps with every rank's work at the
group's mean (tokens even: the same work, spread evenly). A rank slow for another reason exchanges as much as its
peers and stays a slow worker.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Cause, Evidence, JobFinding, RankReport, SlowRank

ALL_TO_ALL = re.compile(r"all_?to_?all", re.IGNORECASE)
SKEW = 1.2
"""a rank exchanging this many times its group's median all-to-all elements holds hot experts"""
MIN_GROUP = 3
WAITS_LESS = 0.8
"""the hot ranks' all-to-all time at most this share of the others' median: the others wait for them"""


def _work(r: RankReport) -> list[float]:
    return [p.forward + p.backward + p.optimizer for p in r.step_phases]


def _exchange(ranks: list[RankReport]) -> dict[str | None, dict[int, tuple[float, float]]]:
    """Process group -> rank -> (all-to-all elements, all-to-all µs) per step."""
    out: dict[str | None, dict[int, tuple[float, float]]] = defaultdict(dict)
    for r in ranks:
        steps = max(r.steps.count, len(r.step_phases), 1)
        for c in r.collectives:
            if c.elems > 0 and ALL_TO_ALL.search(c.op or c.name):
                elems, us = out[c.process_group].get(r.rank, (0.0, 0.0))
                out[c.process_group][r.rank] = (elems + c.elems / steps, us + c.total_us / steps)
    return out


def _gain(ranks: list[RankReport], group: list[int]) -> float:
    """µs per step saved with every rank of `group` doing the group's mean work (replayed: the step waits for its
    slowest rank)."""
    work = {r.rank: _work(r) for r in ranks}
    steps = {len(w) for w in work.values()}
    if len(steps) != 1 or 0 in steps:
        return 0.0
    saved = []
    for t in range(steps.pop()):
        now = {r: w[t] for r, w in work.items()}
        even = float(np.mean([now[r] for r in group]))
        saved.append(max(now.values()) - max({**now, **dict.fromkeys(group, even)}.values()))
    return max(float(np.mean(saved)), 0.0)


def _finding(ranks: list[RankReport], pg: str | None, seen: dict[int, tuple[float, float]]) -> JobFinding | None:
    elems = {r: e for r, (e, _) in seen.items()}
    base = median(list(elems.values()))
    hot = sorted(r for r, e in elems.items() if e >= SKEW * base)
    cold = [r for r in elems if r not in hot]
    if not hot or not cold or base <= 0:
        return None
    work = {r.rank: median(_work(r)) for r in ranks if r.rank in elems and r.step_phases}
    if any(r not in work for r in elems) or min(work[r] for r in hot) <= median(list(work.values())):
        return None
    waits = {r: us for r, (_, us) in seen.items()}
    others = median([waits[r] for r in cold])
    if max(waits[r] for r in hot) > WAITS_LESS * others:
        return None
    group = sorted(elems)
    ratios = ", ".join(f"{elems[r] / base:.2f}x" for r in hot)
    where = f" (process group {pg})" if pg else ""
    who, verb = (f"rank {hot[0]}", "exchanges") if len(hot) == 1 else (f"ranks {format_rank_set(hot)}", "exchange")
    return JobFinding(
        cause=Cause.EXPERT_IMBALANCE,
        summary=f"{who} of the expert-parallel group rank {format_rank_set(group)}{where} "
        f"{verb} {ratios} the group's median all-to-all volume and compute longer; the other ranks wait for "
        f"them in the all-to-all ({others / 1000:,.1f} ms per step, they "
        f"{median([waits[r] for r in hot]) / 1000:,.1f} ms)",
        ranks=hot,
        gain_us=_gain(ranks, group),
        remedy=cause_row(Cause.EXPERT_IMBALANCE).next_step.format(r=format_rank_set(hot)),
        evidence=[
            Evidence(metric="all-to-all elements per step", value=max(elems[r] for r in hot), baseline=base,
                     unit="elements", detail=f"rank {format_rank_set(hot)}: {ratios} the group's median"),
            Evidence(metric="all-to-all time per step", value=median([waits[r] for r in hot]), baseline=others,
                     detail="the ranks with fewer tokens wait in the all-to-all for the hot experts' ranks"),
        ],
    )  # fmt: skip


def expert_imbalance(ranks: list[RankReport], slow: list[SlowRank]) -> tuple[list[JobFinding], list[SlowRank]]:
    """The expert-imbalance findings of the job's expert-parallel groups, and the slow ranks less the hot experts'
    ranks named for their compute (the routing's, not the worker's)."""
    findings = []
    for pg, seen in _exchange(ranks).items():
        if len(seen) >= MIN_GROUP and (f := _finding(ranks, pg, seen)) is not None:
            findings.append(f)
    hot = {r for f in findings for r in f.ranks}
    return findings, [s for s in slow if not (s.rank in hot and s.cause is Cause.COMPUTE)]
