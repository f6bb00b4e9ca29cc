"""Does a CPU rank do more work than the others? Its op calls per step times their floors, against theirs. Pure.

On a CPU the scheduler stretches some rank's ops for many steps in a row, so wall-clock compute cannot tell a rank
that waits for a CPU from one that computes more; the contention correction (rank_costs) takes the stretches out,
but what it may leave in is as large as a real straggler's excess when every rank waits for a CPU a third of its
step. The call floors (analyses.call_floors: each op call's least time over the steps) are what contention cannot
raise. For each rank and each call slot every rank has, the log of its floor over the median of the other ranks'
floors; the rank's ratio is the weighted median of these (weights: the others' floors, none over 5% of the total,
so that no single op decides), "the typical op call takes this many times the others'".

Its noise: the floors are only as reproducible as the work. The same ratio taken between the rank's own even and
odd steps measures that: ~1 for fixed-shape work, far from it for inputs whose length varies per step (a floor then
follows the shortest input a rank drew, and healthy ranks' floors differ by as much as a straggler's). The job's
noise is the largest such split over its ranks. A rank's floors stand out when their ratio reaches
DiagnosisConfig.floor_ratio and its log is floor_noise_multiple times the job's noise: then its extra work is not
waiting for a CPU. Every rank must carry floors of at least MIN_CALLS common calls, else nothing stands out.

With few recorded steps on loaded cores a half of two or three steps can have every call of an op stretched, and
the split-half noise then dwarfs any rank's effect. Where a rank has at least MIN_PEERS other ranks, their own
ratios are a second measure of the noise, between ranks rather than between steps: how far healthy floors stray
from each other on this machine, this job. The rank's floors also stand out when the log of their ratio is
floor_peer_multiple times the largest of its peers' (each against the ratio of its own peers), and that spread is
taken as at least MIN_PEER_SPREAD: peers that agree closely do not make a small difference a large one.

More work is also more calls of the same cost (a layer applied twice, a loop over more microbatches): the floors of
the call slots every rank has cannot see it. Each op's calls per step (the rank's top functions) times the others'
typical floor of one of its calls (the median of their slots' floors), summed over the ops every rank calls, is the
work the rank's calls would take at the others' cost per call; over the others' own sum it is the rank's call
ratio. The rank's work ratio, what `ratio` holds, is its floor ratio times its call ratio: comparable work, calls x
time per call. Call counts are exact (a trace holds every call); the noise is the floors'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.stats import weighted_quantile
from stepscope_contract.report import RankReport

F64 = npt.NDArray[np.float64]
MIN_CALLS = 20
"""common call slots needed to compare ranks"""
MIN_FLOOR_US = 5.0
"""calls whose floor is below this on the rank or the others' are left out (timer resolution)"""
MAX_WEIGHT_SHARE = 0.05
"""no call weighs more than this share of the compared floors"""
MIN_PEERS = 3
"""other ranks needed for their ratios' spread to measure the noise"""
MIN_PEER_SPREAD = math.log(1.05)
"""the least spread of the peers' ratios (a log) the rank's ratio is measured against"""


@dataclass(frozen=True)
class FloorEffect:
    rank: int
    ratio: float
    """the rank's work over the other ranks': its per-call floor ratio times its call ratio"""
    noise: float
    """the job's split-half noise of the floor ratio, as a log"""
    calls: int
    """call slots compared"""
    call_ratio: float = 1.0
    """its calls per step, at the others' cost per call, over the others' (1.0 where calls are not counted)"""
    peer_spread: float | None = None
    """the largest |log| of the other ranks' own ratios, at least MIN_PEER_SPREAD (None: fewer than MIN_PEERS)"""

    @property
    def per_call(self) -> float:
        """the rank's typical call floor over the other ranks' (weighted median)"""
        return self.ratio / self.call_ratio

    def stands_out(self, min_ratio: float, noise_multiple: float, peer_multiple: float) -> bool:
        """Above `min_ratio` and `noise_multiple` times the split-half noise, or `peer_multiple` times the spread
        of its peers' ratios (module docstring)."""
        effect = math.log(self.ratio)
        if self.ratio >= min_ratio and effect >= noise_multiple * self.noise:
            return True
        return self.peer_spread is not None and effect >= peer_multiple * self.peer_spread


def _weighted_median(values: F64, weights: F64) -> float:
    order = np.argsort(values, kind="stable")
    return weighted_quantile(list(zip(values[order].tolist(), weights[order].tolist(), strict=True)), 0.5)


def _log_ratio(mine: F64, ref: F64) -> tuple[float, int]:
    ok = (mine >= MIN_FLOOR_US) & (ref >= MIN_FLOOR_US)
    if not ok.any():
        return 0.0, 0
    weight = np.minimum(ref[ok], MAX_WEIGHT_SHARE * float(ref[ok].sum()))
    return _weighted_median(np.log(mine[ok] / ref[ok]), weight), int(ok.sum())


def floor_effects(ranks: list[RankReport]) -> dict[int, FloorEffect]:
    """Each rank's call floors against the other ranks' (see the module docstring); empty when not every rank
    carries floors of at least MIN_CALLS common calls."""
    tables: dict[int, dict[str, tuple[float, float, float]]] = {}
    for r in ranks:
        f = r.call_floors
        if f is None or not f.calls:
            return {}
        tables[r.rank] = dict(zip(f.calls, zip(f.floor_us, f.even_us, f.odd_us, strict=True), strict=True))
    if len(tables) < 2:
        return {}
    common = sorted(set.intersection(*(set(t) for t in tables.values())))
    if len(common) < MIN_CALLS:
        return {}
    order = sorted(tables)
    cube = np.asarray([[tables[r][c] for c in common] for r in order], dtype=np.float64)  # rank, call, (all/even/odd)
    floors = cube[:, :, 0]
    noise = 0.0
    found: dict[int, tuple[float, int]] = {}
    for i, rank in enumerate(order):
        ref = np.median(np.delete(floors, i, axis=0), axis=0)
        found[rank] = _log_ratio(floors[i], ref)
        split, _ = _log_ratio(cube[i, :, 1], np.maximum(cube[i, :, 2], 1e-9))
        noise = max(noise, abs(split))
    calls = call_ratios(ranks)
    logs = {r: lr + math.log(calls.get(r, 1.0)) for r, (lr, n) in found.items() if n >= MIN_CALLS}
    spreads = _peer_spreads(logs)
    return {r: FloorEffect(r, math.exp(logs[r]), noise, found[r][1], calls.get(r, 1.0), spreads[r]) for r in logs}


def _peer_spreads(logs: dict[int, float]) -> dict[int, float | None]:
    """Each rank's peer spread: the largest |log| among the other ranks (the job's largest, or for the rank that
    holds it the second largest), at least MIN_PEER_SPREAD; None with fewer than MIN_PEERS other ranks."""
    if len(logs) - 1 < MIN_PEERS:
        return dict.fromkeys(logs)
    first, second = sorted(logs, key=lambda r: abs(logs[r]), reverse=True)[:2]
    return {r: max(abs(logs[second if r == first else first]), MIN_PEER_SPREAD) for r in logs}


def _per_call(r: RankReport) -> dict[str, tuple[float, float]]:
    """op name -> (calls per step, the median floor of its call slots), for the ops with floors the rank counts."""
    f = r.call_floors
    if f is None or r.steps.count <= 0:
        return {}
    slots: dict[str, list[float]] = {}
    for call, floor in zip(f.calls, f.floor_us, strict=True):
        slots.setdefault(call.rpartition("#")[0], []).append(floor)
    counts = {b.name: b.count for b in r.top_functions if b.count > 0}
    return {op: (counts[op] / r.steps.count, float(np.median(v))) for op, v in slots.items() if op in counts}


def call_ratios(ranks: list[RankReport]) -> dict[int, float]:
    """Each rank's calls per step at the other ranks' cost per call, over the other ranks' (module docstring), over
    the ops every rank counts; empty where they count none in common."""
    tables = {r.rank: _per_call(r) for r in ranks}
    if len(tables) < 2:
        return {}
    ops = sorted(set.intersection(*(set(t) for t in tables.values())))
    if not ops:
        return {}
    order = sorted(tables)
    calls = np.asarray([[tables[r][op][0] for op in ops] for r in order], dtype=np.float64)
    cost = np.asarray([[tables[r][op][1] for op in ops] for r in order], dtype=np.float64)
    out: dict[int, float] = {}
    for i, rank in enumerate(order):
        theirs_calls = np.median(np.delete(calls, i, axis=0), axis=0)
        theirs_cost = np.median(np.delete(cost, i, axis=0), axis=0)
        base = float(np.dot(theirs_calls, theirs_cost))
        if base > 0:
            out[rank] = float(np.dot(calls[i], theirs_cost)) / base
    return out
