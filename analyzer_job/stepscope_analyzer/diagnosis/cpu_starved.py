"""A CPU rank that waits for a CPU while the other ranks do not: another process on its node takes its CPU time.
Pure.

The costs are tested without the stretches of waiting for a CPU (rank_costs), so a rank that a neighbour starves
looks balanced there: its ops take as long as the others' once the stretch is out. Its wall-clock time still makes
the job wait. A rank is CPU-starved when
1. its own time per step (compute + host) stands out in wall-clock time against the other ranks (straggler_test:
   effect size >= the outlier threshold, consistent over the steps, at least the user's floor);
2. the other ranks wait for it (by wait_share of that excess);
3. most of that excess (STRETCH_SHARE) is the stretch taken out of its samples, beyond the other ranks' stretch;
4. the stretch is its own: its median dilation is at least MIN_DILATION and exceeds 1 by LOPSIDED times what the
   other ranks' median dilation exceeds 1 by. Oversubscribed CPUs (several ranks per core) stretch every rank
   alike and fail this; one busy neighbour on one rank's core does not.
It is only looked for when no rank is slow by its own costs: a straggler that burns CPU starves the ranks that share
its cores, and those are its effect, not a cause.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.job_view import JobView
from stepscope_analyzer.diagnosis.stats import median
from stepscope_analyzer.diagnosis.straggler_test import Effect, effects

STRETCH_SHARE = 0.5
"""at least this share of its wall-clock excess is stretch the others do not have"""
MIN_DILATION = 1.3
LOPSIDED = 3.0


@dataclass(frozen=True)
class Starved:
    effect: Effect
    """its own time per step (compute + host) in wall-clock time against the other ranks"""
    stretch_us: float
    """its median time per step waiting for a CPU (the stretch taken out of its samples)"""
    others_stretch_us: float
    dilation: float
    others_dilation: float


def _own(view: JobView, rank: int, which: str) -> npt.NDArray[np.float64]:
    s = view.samples[rank]
    source = s.costs if which == "wall" else s.tested
    out: npt.NDArray[np.float64] = source["compute"] + source["host"]
    return out


def starved_ranks(view: JobView, cfg: DiagnosisConfig) -> list[Starved]:
    """Every CPU-starved rank (see the module docstring)."""
    ranks = [r for r, s in view.samples.items() if s.per_step and s.steps >= 3]
    if len(ranks) < 2 or not view.has_collectives:
        return []
    floor = cfg.min_slowdown_percent / 100.0 * view.step_us
    noise_floor = cfg.noise_floor_percent / 100.0 * view.step_us
    wall = {r: _own(view, r, "wall") for r in ranks}
    stretch = {r: float(np.median(wall[r] - _own(view, r, "tested"))) for r in ranks}
    dilation = {r: float(np.median(wall[r] / np.maximum(_own(view, r, "tested"), 1e-9))) for r in ranks}
    waiting = {r for r in ranks if view.lateness(r) <= 0}
    out = []
    for e in effects(wall, noise_floor, waiting=waiting):
        others = [r for r in ranks if r != e.rank]
        their_stretch = median([stretch[r] for r in others])
        their_dilation = median([dilation[r] for r in others])
        mine = dilation[e.rank]
        lateness = view.lateness(e.rank)
        if (
            e.z >= cfg.outlier_threshold
            and e.consistent(cfg.consistency_alpha)
            and e.excess_us >= floor
            and lateness > 0
            and lateness >= cfg.wait_share * e.excess_us
            and stretch[e.rank] - their_stretch >= STRETCH_SHARE * e.excess_us
            and mine >= MIN_DILATION
            and mine - 1.0 >= LOPSIDED * max(their_dilation - 1.0, 0.0)
        ):
            out.append(Starved(e, stretch[e.rank], their_stretch, mine, their_dilation))
    return out
