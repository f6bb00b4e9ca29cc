"""The job as the slow-rank diagnosis sees it (per-rank cost samples, the step time, who waits for whom), and a
flagged cost of one rank. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stepscope_analyzer.diagnosis.floor_test import FloorEffect, floor_effects
from stepscope_analyzer.diagnosis.intermittent import Stall
from stepscope_analyzer.diagnosis.rank_costs import COSTS, RankSamples, rank_samples, wait_is_measured
from stepscope_analyzer.diagnosis.stats import medians_of_others
from stepscope_analyzer.diagnosis.straggler_test import Effect
from stepscope_contract.report import RankReport


@dataclass(frozen=True)
class JobView:
    """What every rank is compared against: samples, the job's step time and the waits."""

    samples: dict[int, RankSamples]
    step_us: float
    waits: dict[int, float]
    others_waits: dict[int, float]
    wall: dict[str, dict[int, tuple[float, float]]]
    """cost -> rank -> (its median wall-clock value per step, the median of the other ranks' medians)"""
    has_collectives: bool
    measured_wait: bool
    mean_step_us: float = 0.0
    floors: dict[int, FloorEffect] = field(default_factory=dict)
    """CPU ranks' call floors against the other ranks' (floor_test), where every rank carries them"""
    replica_lateness: dict[int, float] = field(default_factory=dict)
    """pipeline peers: how long the other replicas wait for this rank's replica per step (diagnosis.peers)"""

    def others_wait(self, rank: int) -> float:
        return self.others_waits[rank]

    def lateness(self, rank: int) -> float:
        """How long the other ranks wait for this one per step (their median wait minus its own); among pipeline
        peers, at least how long the other replicas wait for its replica."""
        own = self.others_waits[rank] - self.waits[rank]
        return max(own, self.replica_lateness.get(rank, own))


def _mine_and_theirs(values: dict[int, float]) -> dict[int, tuple[float, float]]:
    ranks = list(values)
    others = medians_of_others([values[r] for r in ranks])
    return {r: (values[r], float(o)) for r, o in zip(ranks, others, strict=True)}


@dataclass(frozen=True)
class Flag:
    cost: str
    effect: Effect
    wall_excess_us: float
    """the excess in wall-clock time (what the job pays), where the effect is measured without CPU stretches"""
    stall: Stall | None = None
    """set when the rank stalls intermittently on this cost"""
    persistent: bool = True
    """the effect is straggler_test's (the median stands out); False: it describes the stalls alone"""
    floors: FloorEffect | None = None
    """set when the rank's call floors decided (its cost stood out in wall-clock time only)"""
    late: MeanRatio | None = None
    """set when the other ranks' waiting decided (late_share) with the rank's mean cost against theirs"""
    own_excess_us: float | None = None
    """the excess the rank's own work takes, without the time it waited for a CPU (None: wall_excess_us)"""

    @property
    def waited_excess_us(self) -> float:
        """how long the others can wait for this excess: the rank's extra work itself"""
        return self.wall_excess_us if self.own_excess_us is None else self.own_excess_us


@dataclass(frozen=True)
class MeanRatio:
    """A rank's mean cost per step against the median of the other ranks' means."""

    mine_us: float
    theirs_us: float
    lateness_us: float
    """how long the other ranks wait for it per step"""
    corrected: bool
    """the means are without CPU-contention stretches (CPU ranks)"""

    @property
    def ratio(self) -> float:
        return self.mine_us / self.theirs_us if self.theirs_us > 0 else float("inf")


def wall_excess(view: JobView, rank: int, cost: str) -> float:
    mine, theirs = view.wall[cost][rank]
    return mine - theirs


def _waits(samples: dict[int, RankSamples]) -> tuple[dict[int, float], dict[int, float]]:
    """Each rank's mean wait per step (as ranks[] quotes it) and the median of the other ranks'."""
    waits = {r: float(np.mean(s.wait)) for r, s in samples.items()}
    return waits, {r: theirs for r, (_, theirs) in _mine_and_theirs(waits).items()}


def latenesses(ranks: list[RankReport]) -> dict[int, float]:
    """How long the other ranks wait for each rank per step (JobView.lateness without a replica's)."""
    waits, others = _waits({s.rank: s for s in rank_samples(ranks)})
    return {r: others[r] - w for r, w in waits.items()}


def median_step_us(ranks: list[RankReport]) -> float:
    """The job's median step: every rank's recorded steps pooled (JobView.step_us of all the ranks)."""
    return float(np.median(np.concatenate([s.step_us for s in rank_samples(ranks)])))


def job_view(
    ranks: list[RankReport], replica_lateness: dict[int, float] | None = None, step_us: float | None = None
) -> JobView:
    """The view of `ranks`; `replica_lateness`: among pipeline peers, how long the other replicas wait for each
    rank's replica (diagnosis.peers); `step_us`: the job's median step where `ranks` are some of its ranks (a
    pipeline stage's peers), the step the user's floor and the verdict speak of (default: that of `ranks`)."""
    samples = {s.rank: s for s in rank_samples(ranks)}
    pooled = np.concatenate([s.step_us for s in samples.values()])
    waits, others = _waits(samples)
    wall = {cost: _mine_and_theirs({r: float(np.median(s.costs[cost])) for r, s in samples.items()}) for cost in COSTS}
    blocked = any(float(np.max(s.phases["communication_wait"])) > 0 for s in samples.values())
    median_step, mean_step = float(np.median(pooled)) if step_us is None else step_us, float(np.mean(pooled))
    floors = floor_effects(ranks)
    return JobView(samples, median_step, waits, others, wall, blocked, wait_is_measured(ranks), mean_step, floors,
                   dict(replica_lateness or {}))  # fmt: skip
