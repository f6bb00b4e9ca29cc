"""Which ranks slow the job, and why. Pure.

Steps are synchronised by collectives, so a slow rank does not show a longer step: the others wait for it inside
their collectives. A rank is slow when
1. one of its own costs per step (compute, host time outside the step's work, own communication) stands out
   against the other ranks by more than the job's own noise, consistently over the recorded steps
   (straggler_test: effect size z >= outlier_threshold and a sign test over the steps), and by at least the
   user's floor (min_slowdown_percent of the median step). On CPU ranks the cost is tested without the stretches
   of waiting for a CPU, and its wall-clock time must corroborate it (wall_corroboration_z): the correction may
   remove a signal that is noise, it may not create one;
2. the other ranks wait for it: its wait inside collectives is below theirs, by at least `wait_share` of its
   excess for compute (host work that burns a shared CPU slows the others through contention instead, so for host
   time any positive lag will do: the causes table's wait_weight). In a job without collectives this check is moot.
   With two ranks this decides which one slows the other.
Arriving last alone is not enough (no own cost stands out), and a job where every rank got slower has no rank
that stands out. The gain of fixing a rank is the smaller of its excess and how long the others wait for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stepscope_analyzer.diagnosis.causes import CAUSES, cause_row, row_for_cost
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.evidence import cost_evidence, name_evidence, name_times, wait_evidence
from stepscope_analyzer.diagnosis.rank_costs import COSTS, RankSamples, rank_samples, wait_is_measured
from stepscope_analyzer.diagnosis.stats import median, medians_of_others
from stepscope_analyzer.diagnosis.straggler_test import Effect, effects
from stepscope_contract.report import Cause, Evidence, RankReport, SlowRank

TAKE_OVER_SHARE = 0.5
"""a GPU rank's flagged excess is another cause (the causes table's `takes_over`) when that cause's device time
exceeds the other ranks' by more than this share of it"""


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

    def others_wait(self, rank: int) -> float:
        return self.others_waits[rank]

    def lateness(self, rank: int) -> float:
        """How long the other ranks wait for this one per step (their median wait minus its own)."""
        return self.others_waits[rank] - self.waits[rank]


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


def wall_excess(view: JobView, rank: int, cost: str) -> float:
    mine, theirs = view.wall[cost][rank]
    return mine - theirs


def job_view(ranks: list[RankReport]) -> JobView:
    samples = {s.rank: s for s in rank_samples(ranks)}
    pooled = np.concatenate([s.step_us for s in samples.values()])
    waits = {r: float(np.mean(s.wait)) for r, s in samples.items()}  # per step, as ranks[] quotes it
    others = {r: theirs for r, (_, theirs) in _mine_and_theirs(waits).items()}
    wall = {cost: _mine_and_theirs({r: float(np.median(s.costs[cost])) for r, s in samples.items()}) for cost in COSTS}
    blocked = any(float(np.max(s.phases["communication_wait"])) > 0 for s in samples.values())
    return JobView(samples, float(np.median(pooled)), waits, others, wall, blocked, wait_is_measured(ranks))


def flagged_costs(view: JobView, cfg: DiagnosisConfig) -> dict[int, list[Flag]]:
    """Per rank, the own costs that stand out (noise-aware, consistent, above the floor)."""
    floor = cfg.min_slowdown_percent / 100.0 * view.step_us
    noise_floor = cfg.noise_floor_percent / 100.0 * view.step_us
    out: dict[int, list[Flag]] = {}
    for cost in COSTS:
        if cost == "communication" and not view.measured_wait:
            continue  # estimated waits leave every rank the same own communication time
        tested = {r: s.tested[cost] for r, s in view.samples.items()}
        residual = {r: s.residual_us(cost) for r, s in view.samples.items()}
        waiting = {r for r in view.samples if view.lateness(r) <= 0} if view.has_collectives else None
        wall_samples = {r: s.costs[cost] for r, s in view.samples.items()}
        wall_z = {e.rank: e.z for e in effects(wall_samples, noise_floor, waiting=waiting)}
        for e in effects(tested, noise_floor, residual, waiting):
            wall = wall_excess(view, e.rank, cost)
            stands_out = e.z >= cfg.outlier_threshold and wall_z[e.rank] >= cfg.wall_corroboration_z
            if stands_out and e.consistent(cfg.consistency_alpha) and min(e.excess_us, wall) >= floor:
                out.setdefault(e.rank, []).append(Flag(cost, e, wall))
    return out


def waited_for(view: JobView, rank: int, flags: list[Flag], cfg: DiagnosisConfig) -> bool:
    """The other ranks wait for this one: by at least wait_share of its excess (weighted per cause), and at all."""
    if not view.has_collectives:
        return True
    needed = sum(cfg.wait_share * row_for_cost(f.cost).wait_weight * f.wall_excess_us for f in flags)
    lateness = view.lateness(rank)
    return lateness > 0 and lateness >= needed


def _phase_of(view: JobView, rank: int, cost: str) -> str | None:
    """The phase of `cost` whose median per step exceeds the other ranks' the most."""
    best, name = 0.0, None
    for phase in row_for_cost(cost).phases:
        mine = float(np.median(view.samples[rank].phases[phase]))
        theirs = median([float(np.median(s.phases[phase])) for r, s in view.samples.items() if r != rank])
        if mine - theirs > best:
            best, name = mine - theirs, phase
    return name


def phase_evidence(view: JobView, rank: int, phase: str) -> Evidence:
    mine = float(np.median(view.samples[rank].phases[phase]))
    theirs = median([float(np.median(s.phases[phase])) for r, s in view.samples.items() if r != rank])
    detail = f"step phase {phase}: {mine / 1000:,.2f} ms per step vs {theirs / 1000:,.2f} ms on the other ranks"
    return Evidence(metric=f"phase {phase}", value=mine, baseline=theirs, detail=detail)


def _refine_cause(ranks: dict[int, RankReport], rank: int, flag: Flag) -> Cause:
    """The flagged cost's cause, or on a GPU rank the cause that takes it over (causes table: `takes_over`) when
    most of the excess is that cause's device time (e.g. pageable host memory: slow copies are memory, not the host
    time or compute they fall in)."""
    cause = row_for_cost(flag.cost).cause
    r = ranks[rank]
    if r.device != "cuda":
        return cause
    for row in CAUSES:
        if flag.cost in row.takes_over:
            theirs = median([_per_step(x, row.device_time) for k, x in ranks.items() if k != rank])
            if _per_step(r, row.device_time) - theirs > TAKE_OVER_SHARE * flag.wall_excess_us:
                return row.cause
    return cause


def _per_step(r: RankReport, attr: str) -> float:
    return float(getattr(r, attr)) / max(r.steps.count, 1)


def _confidence(flag: Flag, lateness: float, excess: float, n_ranks: int, cfg: DiagnosisConfig) -> float:
    e = flag.effect
    strength = min(1.0, max(0.0, (e.z - cfg.outlier_threshold) / (2 * cfg.outlier_threshold)))
    consistency = e.steps_above / e.steps if e.steps else 0.5
    corroboration = min(1.0, max(0.0, lateness / excess)) if excess > 0 else 0.5
    size = {1: 0.0, 2: 0.8, 3: 0.9}.get(n_ranks, 1.0)
    steps = 1.0 if e.steps >= 4 else 0.85
    value = (0.45 + 0.2 * strength + 0.15 * consistency + 0.2 * corroboration) * size * steps
    return round(min(0.99, max(0.05, value)), 2)


def find_slow_ranks(ranks: list[RankReport], cfg: DiagnosisConfig) -> list[SlowRank]:
    """Slow ranks among the analysed ones, the one costing the job most first; empty for a balanced job."""
    if len(ranks) < 2:
        return []
    view = job_view(ranks)
    by_rank = {r.rank: r for r in ranks}
    tables: dict[Cause, dict[int, dict[tuple[str, str], float]]] = {}
    result: list[SlowRank] = []
    for rank, flags in sorted(flagged_costs(view, cfg).items()):
        flags.sort(key=lambda f: -f.wall_excess_us)
        excess = sum(f.wall_excess_us for f in flags)
        if not waited_for(view, rank, flags, cfg):
            continue
        primary = flags[0]
        cause = _refine_cause(by_rank, rank, primary)
        lateness = view.lateness(rank)
        gain = min(excess, lateness) if view.has_collectives else excess
        gain = min(max(gain, 0.0), 0.9 * view.step_us)
        phase = _phase_of(view, rank, primary.cost) if cause_row(cause).phases else None
        evidence = [cost_evidence(f.cost, f.effect, f.wall_excess_us, view.samples[rank], view.step_us) for f in flags]
        if phase is not None:
            evidence.append(phase_evidence(view, rank, phase))
        if view.has_collectives:
            evidence.append(wait_evidence(view.waits[rank], view.others_wait(rank), view.measured_wait))
        if cause not in tables:
            tables[cause] = {r.rank: name_times(r, cause, float(max(view.samples[r.rank].steps, 1))) for r in ranks}
        evidence.extend(name_evidence(rank, cause, tables[cause], view.step_us, cfg.max_evidence))
        result.append(
            SlowRank(
                rank=rank,
                cause=cause,
                confidence=_confidence(primary, lateness, excess, len(ranks), cfg),
                slowdown_pct=round(100.0 * gain / max(view.step_us - gain, 1e-9), 1),
                excess_us=round(gain, 1),
                phase=phase,
                effect_z=round(primary.effect.z, 1),
                node=by_rank[rank].node,
                evidence=evidence,
            )
        )
    result.sort(key=lambda s: (-s.excess_us, s.rank))
    return result
