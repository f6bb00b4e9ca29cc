"""A straggler whose cost the others' waits hide: the rank its peers wait for step after step, named by one of two
tests without a threshold of their own, whose own cost leans the same way, reported with what the replay of the
recorded steps gains when it runs like its peers. The slow_workers detector asks it where the cost tests named no
rank. Pure.

Where DDP overlaps its gradient all-reduces with the backward pass, or every rank shares a few loaded cores, the
others' waiting on the training thread understates what a slow rank costs, and the contention correction's
residual hides its extra compute from the effect-size test (diagnosis.slow_ranks): no threshold there is met,
while who the others wait for still shows, step after step. Only peers are compared: the members of a group in one
pipeline stage (a slower stage is the stage's finding, not a rank's). A rank is named when
- one of the two tests finds it the one its peers wait for more than chance would, each at half of
  consistency_alpha (Bonferroni over the two tests, and each over the ranks it tests):
  the order its peers arrive in at their collectives (arrival_order: the step's last too often), or, in a job the
  data-parallel replay re-times (no layout), the replay's saving for it (gain_permutation: the heaviest by more,
  and more often, than exchangeable peers would be);
- its compute or host time without CPU-contention stretches exceeds its peers' median, and in most steps (the cost
  with the larger excess is its cause);
- the replay of the recorded steps with it running like its peers (ranking.rank_what_if) gains time that clears
  its noise (replayed_gain.clears_noise) and reaches the user's floor. That gain is its excess. A rank whose gain clears
  its noise but not the floor is not named; the verdict says what it costs the job (Found.under_floor);
- that gain is mostly its own: its leaning cost's excess over its peers' (without CPU-contention stretches) is at
  least OWN_SHARE of it. The replay re-times wall-clock work: on shared cores a rank the scheduler kept waiting for
  a CPU more than its peers is the one they wait for, and the replay gains that wait, though the rank computes
  hardly more than they do. Such a rank is not named either; the verdict says how little of the gain is its own
  work and that the rest was waiting for a CPU (Found.under_floor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stepscope_analyzer.diagnosis.arrival_order import LastArrivals, last_arrival_tests
from stepscope_analyzer.diagnosis.causes import STANDSTILL, cause_row, row_for_cost
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.evidence import (
    arrival_evidence,
    cost_evidence,
    gain_test_evidence,
    name_evidence,
    name_times,
    wait_evidence,
)
from stepscope_analyzer.diagnosis.facts import JobFacts
from stepscope_analyzer.diagnosis.gain_permutation import GainTest, gain_permutation_tests
from stepscope_analyzer.diagnosis.job_view import JobView, job_view, wall_excess
from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.ranking import rank_what_if
from stepscope_analyzer.diagnosis.replayed_gain import clears_noise
from stepscope_analyzer.diagnosis.slow_ranks import not_its_own, phase_evidence, phase_of, strength
from stepscope_analyzer.diagnosis.straggler_test import Effect, effects
from stepscope_analyzer.diagnosis.waits import with_waiters
from stepscope_contract.report import Evidence, SlowRank, WhatIf

LEANING = ("compute", "host")
"""the own costs that may account for arriving late"""
TESTS = 2
"""the tests that may name a rank (the arrival order, the replay's saving): consistency_alpha is split over them"""
OWN_SHARE = 0.5
"""the share of the replayed gain its own cost's excess must account for: most of it"""
LEAN_WEIGHT = 0.1
"""the weight in its confidence of how far its leaning cost stands beyond the noise (half the cost tests' weight:
the test that named it is the waiting, not the cost)"""


@dataclass(frozen=True)
class Waited:
    """A rank one of the two tests finds its peers wait for: the test's figures as the evidence and the verdict
    quote them."""

    rank: int
    peers: tuple[int, ...]
    p_value: float
    share: float
    """the share of the steps the test counts for it (the step's last; the heaviest in the replay)"""
    evidence: Evidence
    words: str
    """'arrives last at its peers' collectives in 5 of 5 steps (p = 0.0039)'"""


def _by_arrivals(t: LastArrivals) -> Waited:
    words = f"arrives last at its peers' collectives in {t.last_steps} of {t.steps} steps (p = {t.p_value:.2g})"
    return Waited(t.rank, t.peers, t.p_value, t.last_steps / t.steps, arrival_evidence(t), words)


def _by_gain(t: GainTest) -> Waited:
    words = (
        f"is the one the replay saves the most for, more than chance among its peers would make it (p = "
        f"{t.p_value:.2g}; the heaviest in {t.heaviest_steps} of {t.steps} steps)"
    )
    return Waited(t.rank, t.peers, t.p_value, t.heaviest_steps / t.steps, gain_test_evidence(t), words)


def _leaning(view: JobView, t: Waited, noise_floor: float) -> tuple[str, Effect] | None:
    """The rank's own cost (without CPU-contention stretches) that exceeds its peers' median the most, above it in
    most steps; None when neither does. Its effect is the straggler test's (the same noise, the same z): the
    evidence quotes it as it is, whether or not it reaches the outlier threshold."""
    best: tuple[str, Effect] | None = None
    peers = {r: s for r, s in view.samples.items() if r in t.peers}
    waiting = {r for r in peers if view.lateness(r) <= 0} if view.has_collectives else None
    for cost in LEANING:
        tested = {r: s.tested[cost] for r, s in peers.items()}
        residual = {r: s.residual_us(cost) for r, s in peers.items()}
        e = next((e for e in effects(tested, noise_floor, residual, waiting) if e.rank == t.rank), None)
        if e is None or e.excess_us <= 0 or 2 * e.steps_above <= e.steps:
            continue
        if best is None or e.excess_us > best[1].excess_us:
            best = (cost, e)
    return best


def _evidence(view: JobView, facts: JobFacts, t: Waited, lean: tuple[str, Effect], w: WhatIf) -> list[Evidence]:
    cost, e = lean
    rank, step_us = t.rank, view.step_us
    cause = row_for_cost(cost).cause
    out = [t.evidence]
    out.append(cost_evidence(cost, e, wall_excess(view, rank, cost), view.samples[rank], step_us, gain_us=w.gain_us))
    phase = phase_of(view, rank, cost) if cause_row(cause).phases else None
    if phase is not None:
        out.append(phase_evidence(view, rank, phase))
    blocked = float(np.mean(view.samples[rank].phases["communication_wait"]))
    out.append(wait_evidence(view.waits[rank], view.others_wait(rank), view.measured_wait, blocked))
    peers = [r for r in facts.ok if r.rank in t.peers]
    tables = {r.rank: name_times(r, cause, float(max(view.samples[r.rank].steps, 1))) for r in peers}
    return out + name_evidence(rank, cause, tables, step_us, 6)


def _under_floor(t: Waited, w: WhatIf, step_us: float, cfg: DiagnosisConfig) -> str:
    """'rank 3 arrives last ... but running like its peers gains 9.6 ms per step (2.4%), under the 4% floor'."""
    return (
        f"rank {t.rank} {t.words}, but the replay with it running like its peers gains {w.gain_us / 1000:,.1f} ms "
        f"per step ({100.0 * w.gain_us / step_us:.1f}% of the step), under the {cfg.min_slowdown_percent:g}% floor"
    )


def _not_its_own(view: JobView, t: Waited, w: WhatIf, lean: tuple[str, Effect]) -> str:
    """'rank 2 is the one ..., and the replay ... gains 11.0 ms per step, but its own compute ... exceeds its peers'
    by 1.1 ms per step, less than half of that: the rest is time it waited for a CPU'."""
    cost, e = lean
    clause = not_its_own(cost, e.excess_us, corrected=view.samples[t.rank].corrected(cost), share="half")
    return (
        f"rank {t.rank} {t.words}, and the replay with it running like its peers gains {w.gain_us / 1000:,.1f} ms "
        f"per step, but {clause}"
    )


def _confidence(t: Waited, lean: Effect, cfg: DiagnosisConfig) -> float:
    """How often the peers waited for it (the test's share of the steps and its p-value), and how far its leaning
    cost stands beyond the noise (slow_ranks.strength: the cost tests' measure, at a weight of LEAN_WEIGHT)."""
    tested = 0.15 * t.share + 0.2 * (1.0 - TESTS * t.p_value / cfg.consistency_alpha)
    return round(min(0.99, 0.45 + tested + LEAN_WEIGHT * strength(lean, cfg)), 2)


def _slow_rank(view: JobView, facts: JobFacts, t: Waited, cfg: DiagnosisConfig) -> SlowRank | str | None:
    """The rank named, or what it costs the job where that is under the user's floor (None: not named)."""
    lean = _leaning(view, t, cfg.noise_floor_percent / 100.0 * view.step_us)
    if lean is None:
        return None
    w = rank_what_if(facts, t.rank, host=lean[0] == "host")
    if w is None or not clears_noise(w, cfg.gain_noise_z):
        return None
    if w.gain_us < cfg.floor_us(view.step_us):
        return _under_floor(t, w, view.step_us, cfg)
    if lean[1].excess_us < OWN_SHARE * w.gain_us:
        return _not_its_own(view, t, w, lean)
    cost, e = lean
    gain = min(w.gain_us, 0.9 * view.step_us)
    return SlowRank(
        rank=t.rank,
        cause=row_for_cost(cost).cause,
        confidence=_confidence(t, e, cfg),
        slowdown_pct=round(100.0 * gain / (view.step_us - gain), 1),
        excess_us=round(gain, 1),
        phase=phase_of(view, t.rank, cost) if cause_row(row_for_cost(cost).cause).phases else None,
        effect_z=round(e.z, 1),
        node=facts.node_of.get(t.rank),
        evidence=_evidence(view, facts, t, lean, w),
    )


def _peers(t: Waited, layout: Layout | None) -> bool:
    """The group's members are peers: all in one pipeline stage (any group without stages)."""
    if layout is None or layout.stages < 2:
        return True
    return len({layout.stage.get(r, -1) for r in t.peers}) == 1


def waited_for(facts: JobFacts, alpha: float) -> list[Waited]:
    """The ranks either test finds their peers wait for at `alpha` (split over the two tests), peers only, each rank
    once (by the test with the smaller p-value), the least likely first."""
    level = alpha / TESTS
    found = [_by_arrivals(t) for t in last_arrival_tests(facts.arrivals) if t.p_value <= level]
    if facts.dp_work is not None:
        found += [_by_gain(t) for t in gain_permutation_tests(facts.dp_work.work) if t.p_value <= level]
    found.sort(key=lambda t: (t.p_value, t.rank))
    seen: set[int] = set()
    out = []
    for t in found:
        if t.rank not in seen and _peers(t, facts.layout):
            seen.add(t.rank)
            out.append(t)
    return out


def arrival_stragglers(facts: JobFacts, settings: DiagnosisConfig) -> tuple[list[SlowRank], dict[int, str]]:
    """The ranks their peers wait for step after step (see the module docstring), with the ranks that wait for
    them; and those the tests name whose replayed gain is under the user's floor, in words, by rank."""
    tests = waited_for(facts, settings.consistency_alpha)
    if not tests:
        return [], {}
    view = job_view(facts.ok)
    found = [(t.rank, _slow_rank(view, facts, t, settings)) for t in tests]
    slow = [s for _, s in found if isinstance(s, SlowRank)]
    return with_waiters(slow, facts.waits, STANDSTILL), {r: s for r, s in found if isinstance(s, str)}
