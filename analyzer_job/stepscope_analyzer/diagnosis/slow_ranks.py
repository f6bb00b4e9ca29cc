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
   With two ranks this decides which one slows the other. A rank the others do not wait for that much still counts
   when its call floors prove extra work and it shares an oversubscribed CPU with other ranks of the job
   (diagnosis.shared_cpu): it takes CPU time from them; what fixing it gains is then what the replay of the recorded
   steps saves (diagnosis.dp_replay), which the user's floor applies to.
On CPU ranks a compute excess the contention correction hid still counts when the rank's op calls at their least
over the steps take floor_ratio times the other ranks' beyond the floors' noise, or stray from theirs far beyond the
spread of its peers' own ratios (floor_test: contention does not raise a call's least time, more work per call
does), its contention-corrected compute is above theirs in most steps, and its extra work (its wall-clock compute
less the same over its work ratio) reaches the user's floor. The wait check then weighs the extra work itself (the
same share of its contention-corrected compute): on shared cores its wall-clock excess also holds the time it waited
for a CPU while the others computed, which they do not wait for.
In a data-parallel job of four ranks or more (the replay re-times it: diagnosis.dp_replay), a compute excess the
effect-size test finds within the job's noise still counts when the rank's contention-corrected compute exceeds its
peers' in every step or enough of them (the sign test at consistency_alpha) by the user's floor, and the replay of
the recorded steps with it running like its peers saves the user's floor or more, replayed_gain_z standard errors
clear of nothing: on shared cores the replay counts the CPU time its extra work takes from the ranks beside it,
which no wait at a collective shows. The replayed saving is then its excess.
Where inputs vary in size from step to step, every rank's compute spreads so widely that neither test sees a rank
doing twice the work; in a job of four ranks or more, such a rank's compute still counts when the other ranks wait
for it at least late_share of the step (averaged over the steps) and its compute averages late_compute_ratio times
theirs (without contention stretches on CPU ranks) and exceeds theirs by the user's floor in wall-clock time.
On CPU ranks a host excess the contention correction hid still counts when its wall-clock time stands out, most of it
is tensor ops outside the step's work that the other ranks do not run, and the others wait for it at least
late_share of the step (waiting for a CPU stretches every rank's work alike; it adds no ops to one rank); what_ran
names it compute.
Arriving last alone is not enough (no own cost stands out), and a job where every rank got slower has no rank
that stands out. The gain of fixing a rank is the smaller of its excess and how long the others wait for it; a
rank whose gain is below the user's floor is not reported (its own excess is offset elsewhere in its step).
A rank whose cost does not stand out in its median may still stall intermittently (diagnosis.intermittent: a few
steps far longer, on this rank alone); then its excess is averaged over every recorded step (what the job pays),
the same floor and wait checks apply, and the slow rank lists the steps it stalled in.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stepscope_analyzer.diagnosis.causes import CAUSES, cause_row, row_for_cost
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.dp_replay import DpWork, dp_gain_of, dp_work
from stepscope_analyzer.diagnosis.evidence import (
    cost_evidence,
    floor_evidence,
    late_evidence,
    name_evidence,
    name_times,
    stall_evidence,
    wait_evidence,
)
from stepscope_analyzer.diagnosis.job_view import Flag, JobView, MeanRatio, job_view, wall_excess
from stepscope_analyzer.diagnosis.rank_costs import COSTS
from stepscope_analyzer.diagnosis.replayed_gain import clears_noise
from stepscope_analyzer.diagnosis.shared_cpu import busy_ranks
from stepscope_analyzer.diagnosis.stall_flags import stall_flags
from stepscope_analyzer.diagnosis.stats import median
from stepscope_analyzer.diagnosis.straggler_test import MIN_RANKS_FOR_SPREAD, Effect, effects
from stepscope_analyzer.diagnosis.what_ran import OPS_SHARE, by_what_ran, ops_evidence
from stepscope_contract.report import Cause, Evidence, RankReport, SlowRank, WhatIf

OWN_SHARE = 1.0 / 6.0
"""a rank flagged on its cost without CPU-contention stretches is named only where that excess is at least this
share of what the others wait for it (its gain): on shared cores the rest is its wait for a CPU, not its work. A
rank kept waiting for a CPU a fifth to two fifths of each step that computes 1-3% more keeps at most 0.11 of its
gain as its own work; a live host straggler among four gloo ranks on two cores loaded five times over keeps 0.28
(13.4 of 47.7 ms); every straggler of the recorded corpus named this way keeps 0.45 or more. (A rank named by the
waiting alone, whose cost did not stand out, must account for half: arrival_stragglers.OWN_SHARE.)"""
Replayed = Callable[[int], WhatIf | None]
"""a rank -> the what-if of it running like its peers, as the ranking replays it (None: not replayed)"""
TAKE_OVER_SHARE = 0.5
"""a GPU rank's flagged excess is another cause (the causes table's `takes_over`) when that cause's device time
exceeds the other ranks' by more than this share of it"""


def flagged_costs(view: JobView, cfg: DiagnosisConfig, replayed: Replayed | None = None) -> dict[int, list[Flag]]:
    """Per rank, the own costs that stand out (noise-aware, consistent, above the floor); `replayed`, in a job the
    data-parallel replay re-times, what the replay gains with a rank running like its peers (_flag_replayed)."""
    floor = cfg.floor_us(view.step_us)
    noise_floor = cfg.noise_floor_percent / 100.0 * view.step_us
    out: dict[int, list[Flag]] = {}
    wall_compute: dict[int, Effect] = {}
    wall_host: dict[int, Effect] = {}
    tested_compute: dict[int, Effect] = {}
    for cost in COSTS:
        if cost == "communication" and not view.measured_wait:
            continue  # estimated waits leave every rank the same own communication time
        tested = {r: s.tested[cost] for r, s in view.samples.items()}
        residual = {r: s.residual_us(cost) for r, s in view.samples.items()}
        waiting = {r for r in view.samples if view.lateness(r) <= 0} if view.has_collectives else None
        wall_samples = {r: s.costs[cost] for r, s in view.samples.items()}
        wall_effects = {e.rank: e for e in effects(wall_samples, noise_floor, waiting=waiting)}
        if cost == "compute":
            wall_compute = wall_effects
        if cost == "host":
            wall_host = wall_effects
        for e in effects(tested, noise_floor, residual, waiting):
            if cost == "compute":
                tested_compute[e.rank] = e
            wall = wall_excess(view, e.rank, cost)
            stands_out = e.z >= cfg.outlier_threshold and wall_effects[e.rank].z >= cfg.wall_corroboration_z
            if stands_out and e.consistent(cfg.consistency_alpha) and min(e.excess_us, wall) >= floor:
                out.setdefault(e.rank, []).append(Flag(cost, e, wall))
    _flag_floors(view, cfg, tested_compute, out)
    _flag_late(view, cfg, wall_compute, out)
    if replayed is not None:
        _flag_replayed(view, cfg, tested_compute, replayed, out)
    _flag_ops_outside(view, cfg, wall_host, out)
    return out


def _flag_replayed(
    view: JobView, cfg: DiagnosisConfig, tested: dict[int, Effect], replayed: Replayed, out: dict[int, list[Flag]]
) -> None:
    """In a job of four ranks or more (a median of the others to stand out from), ranks whose compute did not stand
    out beyond the job's noise, but whose contention-corrected compute exceeds the others' consistently over the
    steps (the sign test) by the user's floor, and for which the replay of the recorded steps with the rank running
    like its peers saves the user's floor or more, replayed_gain_z standard errors clear of nothing. The flag
    carries the corrected test, and the replayed saving as its excess: what the job pays for it, CPU taken from the
    ranks beside it on shared cores included, which their waits at the collectives do not show."""
    if not view.has_collectives or len(view.samples) < MIN_RANKS_FOR_SPREAD:
        return
    floor = cfg.floor_us(view.step_us)
    for rank, e in tested.items():
        if any(x.cost == "compute" for x in out.get(rank, [])):
            continue
        if not (e.excess_us >= floor and e.consistent(cfg.consistency_alpha)):
            continue
        w = replayed(rank)
        if w is not None and w.gain_us >= floor and clears_noise(w, cfg.replayed_gain_z):
            out.setdefault(rank, []).append(Flag("compute", e, w.gain_us))


def _flag_ops_outside(view: JobView, cfg: DiagnosisConfig, wall: dict[int, Effect], out: dict[int, list[Flag]]) -> None:
    """Ranks whose host time did not stand out once corrected for contention, but whose wall-clock host time does
    (outlier_threshold, consistently over the steps, by the user's floor), mostly as tensor ops outside the step's
    work that the other ranks do not run (what_ran.OPS_SHARE of it), while the others wait for it at least late_share
    of the step: waiting for a CPU stretches every rank's work alike, it does not add ops to one rank alone. The flag
    carries the wall-clock test; what_ran then names it compute."""
    if not view.has_collectives:
        return
    ops = {r: float(np.median(s.ops_outside)) for r, s in view.samples.items() if s.ops_outside is not None}
    for rank, mine in ops.items():
        flagged = any(x.cost in ("host", "compute") for x in out.get(rank, []))
        e = wall.get(rank)
        if flagged or e is None or view.lateness(rank) < cfg.late_share * view.step_us:
            continue
        excess = wall_excess(view, rank, "host")
        extra_ops = mine - median([v for r, v in ops.items() if r != rank])
        stands_out = e.z >= cfg.outlier_threshold and e.consistent(cfg.consistency_alpha)
        if stands_out and excess >= cfg.floor_us(view.step_us) and extra_ops > OPS_SHARE * excess:
            out.setdefault(rank, []).append(Flag("host", e, excess))


def _flag_late(view: JobView, cfg: DiagnosisConfig, wall: dict[int, Effect], out: dict[int, list[Flag]]) -> None:
    """In a job of four ranks or more (a median of the others to stand out from), ranks whose compute did not stand
    out in its median but that the other ranks wait for at least late_share of the step, and whose compute averages
    late_compute_ratio times theirs (without contention stretches on CPU ranks) and exceeds theirs in wall-clock
    time by the user's floor: inputs whose size varies per step spread every rank's steps too widely for the median
    test to see a rank doing twice the work, while the others' waiting, averaged over the steps, is what that rank
    costs them. The flag carries the wall-clock test (`wall`)."""
    if not view.has_collectives or len(view.samples) < MIN_RANKS_FOR_SPREAD:
        return  # two or three ranks: the others' means are a draw or two of the same length noise
    tested = {r: float(np.mean(s.tested["compute"])) for r, s in view.samples.items()}
    clock = {r: float(np.mean(s.costs["compute"])) for r, s in view.samples.items()}
    for rank in view.samples:
        lateness = view.lateness(rank)
        flagged = any(x.cost == "compute" for x in out.get(rank, []))
        if flagged or rank not in wall or lateness < cfg.late_share * view.step_us:
            continue
        corrected = view.samples[rank].corrected("compute")
        means = MeanRatio(tested[rank], median([v for r, v in tested.items() if r != rank]), lateness, corrected)
        excess = clock[rank] - median([v for r, v in clock.items() if r != rank])
        if means.ratio >= cfg.late_compute_ratio and excess >= cfg.floor_us(view.step_us):
            out.setdefault(rank, []).append(Flag("compute", wall[rank], excess, late=means))


def _flag_floors(view: JobView, cfg: DiagnosisConfig, tested: dict[int, Effect], out: dict[int, list[Flag]]) -> None:
    """CPU ranks whose compute did not stand out once corrected for contention, but whose work (floor_test: op
    calls per step times their least time) stands out from the others' (FloorEffect.stands_out): its excess is the
    share of its wall-clock compute that is extra work (its compute less the same over its work ratio), and must
    reach the user's floor. The contention-corrected compute (`tested`: its test per rank) must lean the same way,
    above the others' in most steps; wall-clock time is no check here, as on shared cores it holds as much waiting
    for a CPU as work. The flag carries the corrected test."""
    for rank, f in view.floors.items():
        flagged = any(x.cost == "compute" for x in out.get(rank, []))
        if flagged or rank not in tested:
            continue
        if not f.stands_out(cfg.floor_ratio, cfg.floor_noise_multiple, cfg.floor_peer_multiple):
            continue
        e = tested[rank]
        extra = 1.0 - 1.0 / f.ratio  # the share of its compute that is extra work
        excess = extra * view.wall["compute"][rank][0]
        own = extra * float(np.median(view.samples[rank].tested["compute"]))
        if e.excess_us > 0 and 2 * e.steps_above > e.steps and excess >= cfg.floor_us(view.step_us):
            out.setdefault(rank, []).append(Flag("compute", e, excess, floors=f, own_excess_us=own))


def on_shared_cpu(rank: int, flags: list[Flag], busy: frozenset[int]) -> bool:
    """The rank's call floors prove extra work and it shares an oversubscribed CPU with other ranks of the job (it is
    in `busy`, diagnosis.shared_cpu.busy_ranks): its extra work costs them CPU time, whether or not they wait for it
    at a collective."""
    return rank in busy and any(f.floors is not None for f in flags)


def waited_for(view: JobView, rank: int, flags: list[Flag], cfg: DiagnosisConfig) -> bool:
    """The other ranks wait for this one: by at least wait_share of its excess (weighted per cause), and at all."""
    if not view.has_collectives:
        return True
    needed = sum(cfg.wait_share * row_for_cost(f.cost).wait_weight * f.waited_excess_us for f in flags)
    lateness = view.lateness(rank)
    return lateness > 0 and lateness >= needed


def _per_step_of(view: JobView, rank: int, phase: str, mean: bool) -> tuple[float, float]:
    """(the rank's time in `phase` per step, the median of the other ranks'): medians, or means for a rank that
    stalls intermittently (its stalls are not in its median)."""
    stat = np.mean if mean else np.median
    mine = float(stat(view.samples[rank].phases[phase]))
    theirs = median([float(stat(s.phases[phase])) for r, s in view.samples.items() if r != rank])
    return mine, theirs


def phase_of(view: JobView, rank: int, cost: str, mean: bool = False) -> str | None:
    """The phase of `cost` whose time per step exceeds the other ranks' the most."""
    best, name = 0.0, None
    for phase in row_for_cost(cost).phases:
        mine, theirs = _per_step_of(view, rank, phase, mean)
        if mine - theirs > best:
            best, name = mine - theirs, phase
    return name


def phase_evidence(view: JobView, rank: int, phase: str, mean: bool = False) -> Evidence:
    mine, theirs = _per_step_of(view, rank, phase, mean)
    how = "per step on average" if mean else "per step (median)"
    detail = f"step phase {phase}: {mine / 1000:,.2f} ms {how} vs {theirs / 1000:,.2f} ms on the other ranks"
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


def strength(e: Effect, cfg: DiagnosisConfig) -> float:
    """How far a cost's effect size is beyond the outlier threshold, from 0 (at it or under) to 1 (three times it):
    a part of a slow rank's confidence."""
    return min(1.0, max(0.0, (e.z - cfg.outlier_threshold) / (2 * cfg.outlier_threshold)))


def _confidence(flag: Flag, lateness: float, excess: float, n_ranks: int, cfg: DiagnosisConfig) -> float:
    e = flag.effect
    consistency = e.steps_above / e.steps if e.steps else 0.5
    corroboration = min(1.0, max(0.0, lateness / excess)) if excess > 0 else 0.5
    size = {1: 0.0, 2: 0.8, 3: 0.9}.get(n_ranks, 1.0)
    steps = 1.0 if e.steps >= 4 else 0.85
    value = (0.45 + 0.2 * strength(e, cfg) + 0.15 * consistency + 0.2 * corroboration) * size * steps
    return round(min(0.99, max(0.05, value)), 2)


def _flag_evidence(flag: Flag, view: JobView, rank: int, gain: float | None) -> list[Evidence]:
    """The flagged cost's evidence: the median test's (with `gain`, the verdict's figure, where it differs), the
    call floors' where they decided, and the stalls' where the rank stalls on it."""
    out = []
    if flag.persistent:
        wall = wall_excess(view, rank, flag.cost)
        out.append(cost_evidence(flag.cost, flag.effect, wall, view.samples[rank], view.step_us, gain_us=gain))
    if flag.floors is not None:
        out.append(floor_evidence(flag.floors))
    if flag.late is not None:
        out.append(late_evidence(flag.late, view.step_us))
    if flag.stall is not None:
        out.append(stall_evidence(flag.cost, flag.stall, flag.wall_excess_us, view.step_us))
    return out


def under_floor_words(rank: int, cost: str, excess: float, gain: float, *, waited: bool, floor: float) -> str:
    """'rank 1's compute stands out against its peers' (+9.8 ms per step), but they wait for it 4.2 ms per step,
    under the 4% floor'."""
    how = "they wait for it" if waited else "the replay with it running like its peers saves"
    return (
        f"rank {rank}'s {cost} stands out against its peers' (+{excess / 1000:,.1f} ms per step), but {how} "
        f"{gain / 1000:,.1f} ms per step, under the {floor:g}% floor"
    )


def _own_excess(view: JobView, rank: int, flag: Flag) -> float | None:
    """The excess of the rank's own work that its flag measured without CPU-contention stretches, where the flag is
    the cost test's on corrected samples (None otherwise: the floors, the others' waiting or the stalls decided, or
    the samples were not corrected)."""
    if flag.floors is not None or flag.late is not None or flag.stall is not None:
        return None
    return flag.effect.excess_us if view.samples[rank].corrected(flag.cost) else None


def not_its_own(cost: str, own_us: float, *, corrected: bool, share: str) -> str:
    """'its own compute without CPU-contention stretches exceeds its peers' by 1.1 ms per step, less than half of
    that: the rest is time it waited for a CPU' (`share`: the words of the share, after what the others wait)."""
    own = f"its own {cost} without CPU-contention stretches" if corrected else f"its own {cost} in its median step"
    rest = "time it waited for a CPU" if corrected else f"not its {cost} in most steps"
    excess = f"{own_us / 1000:,.1f} ms per step"
    return f"{own} exceeds its peers' by {excess}, less than {share} of that: the rest is {rest}"


def not_its_own_words(rank: int, cost: str, gain: float, own: float) -> str:
    """'the others wait for rank 2 34.3 ms per step, but its own compute without CPU-contention stretches exceeds
    its peers' by 2.9 ms per step, less than a sixth of that: the rest is time it waited for a CPU'."""
    clause = not_its_own(cost, own, corrected=True, share="a sixth")
    return f"the others wait for rank {rank} {gain / 1000:,.1f} ms per step, but {clause}"


def find_slow_ranks(
    ranks: list[RankReport],
    cfg: DiagnosisConfig,
    replica_lateness: dict[int, float] | None = None,
    under_floor: dict[int, str] | None = None,
    *,
    step_us: float | None = None,
    replayed: Replayed | None = None,
) -> list[SlowRank]:
    """Slow ranks among the analysed ones, the one costing the job most first; empty for a balanced job.
    `replica_lateness`: among pipeline peers, how long the other replicas wait for each rank's replica;
    `under_floor`, if given, receives by rank a sentence for each rank whose cost stands out and whose peers wait for
    it, but whose gain is under the user's floor, though not under the noise floor (under_floor_words). `step_us`:
    the job's median step where `ranks` are some of its ranks (job_view). `replayed`: as flagged_costs"""
    if len(ranks) < 2:
        return []
    view = job_view(ranks, replica_lateness, step_us)
    by_rank = {r.rank: r for r in ranks}
    tables: dict[Cause, dict[int, dict[tuple[str, str], float]]] = {}
    result: list[SlowRank] = []
    busy = busy_ranks(view.samples.values())
    job: tuple[DpWork | None] | None = None  # the replay's work table, built once where a shared-CPU rank needs it
    for rank, flags in sorted(stall_flags(view, cfg, flagged_costs(view, cfg, replayed)).items()):
        flags.sort(key=lambda f: -f.wall_excess_us)
        excess = sum(f.wall_excess_us for f in flags)
        waited = waited_for(view, rank, flags, cfg)
        if not waited and not on_shared_cpu(rank, flags, busy):
            continue
        primary = flags[0]
        flagged_cause = _refine_cause(by_rank, rank, primary)
        cause = by_what_ran(by_rank, rank, flagged_cause, primary.wall_excess_us)
        lateness = view.lateness(rank)
        gain = min(excess, lateness) if view.has_collectives else excess
        if not waited:  # on a shared CPU: what the replay saves (dp_replay), 0 where it cannot replay
            job = job or (dp_work(ranks, list(view.samples.values())),)
            gain = min(excess, dp_gain_of(job[0])([rank])) if job[0] is not None else 0.0
        stall = next((f.stall for f in flags if f.stall is not None), None)
        step = view.mean_step_us if stall is not None else view.step_us  # stalls are in the mean step only
        gain = min(max(gain, 0.0), 0.9 * step)
        own = _own_excess(view, rank, primary)
        if own is not None and own < OWN_SHARE * gain:  # what the others wait for is mostly its wait for a CPU
            if under_floor is not None:
                under_floor[rank] = not_its_own_words(rank, primary.cost, gain, own)
            continue
        if gain < cfg.floor_us(step):  # what fixing it would save is below the user's floor
            if under_floor is not None and gain >= cfg.noise_floor_percent / 100.0 * step:  # not noise
                words = under_floor_words(
                    rank, primary.cost, excess, gain, waited=waited, floor=cfg.min_slowdown_percent
                )
                under_floor[rank] = words
            continue
        phase = phase_of(view, rank, primary.cost, stall is not None) if cause_row(cause).phases else None
        evidence = [e for f in flags for e in _flag_evidence(f, view, rank, gain if f is primary else None)]
        if phase is not None:
            evidence.append(phase_evidence(view, rank, phase, stall is not None))
        ops = ops_evidence(by_rank, rank) if cause is not flagged_cause else None
        if ops is not None:
            evidence.append(ops)
        if view.has_collectives:
            blocked = float(np.mean(view.samples[rank].phases["communication_wait"]))  # as the wait: the mean
            evidence.append(wait_evidence(view.waits[rank], view.others_wait(rank), view.measured_wait, blocked))
        if cause not in tables:
            tables[cause] = {r.rank: name_times(r, cause, float(max(view.samples[r.rank].steps, 1))) for r in ranks}
        evidence.extend(name_evidence(rank, cause, tables[cause], view.step_us, cfg.max_evidence))
        result.append(
            SlowRank(
                rank=rank,
                cause=cause,
                confidence=_confidence(primary, lateness, excess, len(ranks), cfg),
                slowdown_pct=round(100.0 * gain / max(step - gain, 1e-9), 1),
                excess_us=round(gain, 1),
                phase=phase,
                effect_z=round(primary.effect.z, 1),
                node=by_rank[rank].node,
                stalled_steps=list(stall.stalled) if stall else None,
                stall_us=round(stall.spike_excess_us, 1) if stall else None,
                steps_recorded=stall.steps if stall else None,
                evidence=evidence,
            )
        )
    result.sort(key=lambda s: (-s.excess_us, s.rank))
    return result
