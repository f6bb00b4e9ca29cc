"""Does a CPU rank do more work per op call than the others? Its call floors against theirs. Pure.

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


@dataclass(frozen=True)
class FloorEffect:
    rank: int
    ratio: float
    """the rank's typical call floor over the other ranks' (weighted median)"""
    noise: float
    """the job's split-half noise of that ratio, as a log"""
    calls: int
    """call slots compared"""

    def stands_out(self, min_ratio: float, noise_multiple: float) -> bool:
        return self.ratio >= min_ratio and math.log(self.ratio) >= noise_multiple * self.noise


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
    return {r: FloorEffect(r, math.exp(lr), noise, n) for r, (lr, n) in found.items() if n >= MIN_CALLS}
