"""A straggler whose cost the others' waits hide: the rank its peers wait for at their collectives step after step
(diagnosis.arrival_order), whose own cost leans the same way, reported with what the replay of the recorded steps
gains when it runs like its peers. The slow_workers detector asks it where the cost tests named no rank. Pure.

Where DDP overlaps its gradient all-reduces with the backward pass, or every rank shares a few loaded cores, the
others' waiting on the training thread understates what a slow rank costs, and the contention correction's
residual hides its extra compute from the effect-size test (diagnosis.slow_ranks): no threshold there is met,
while the order in which the ranks arrive at the collectives still names it. Only peers are compared: the members
of a group in one pipeline stage (a slower stage is the stage's finding, not a rank's). A rank is named when
- it is its peers' last significantly often (arrival_order: p <= consistency_alpha, over the ranks tested);
- its compute or host time without CPU-contention stretches exceeds its peers' median, and in most steps (the cost
  with the larger excess is its cause);
- the replay of the recorded steps with it running like its peers (ranking.rank_what_if) gains time that clears
  its noise (ranking.clears_noise) and reaches the user's floor. That gain is its excess. A rank whose gain clears
  its noise but not the floor is not named; the verdict says what it costs the job (Found.under_floor).
"""

from __future__ import annotations

import numpy as np

from stepscope_analyzer.diagnosis.arrival_order import LastArrivals, last_arrival_tests
from stepscope_analyzer.diagnosis.causes import STANDSTILL, cause_row, row_for_cost
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.evidence import (
    arrival_evidence,
    cost_evidence,
    name_evidence,
    name_times,
    wait_evidence,
)
from stepscope_analyzer.diagnosis.facts import JobFacts
from stepscope_analyzer.diagnosis.job_view import JobView, job_view, wall_excess
from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.ranking import clears_noise, rank_what_if
from stepscope_analyzer.diagnosis.slow_ranks import phase_evidence, phase_of
from stepscope_analyzer.diagnosis.straggler_test import Effect, effects
from stepscope_analyzer.diagnosis.waits import with_waiters
from stepscope_contract.report import Evidence, SlowRank, WhatIf

LEANING = ("compute", "host")
"""the own costs that may account for arriving late"""


def _leaning(view: JobView, t: LastArrivals, noise_floor: float) -> tuple[str, Effect] | None:
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


def _evidence(view: JobView, facts: JobFacts, t: LastArrivals, lean: tuple[str, Effect], w: WhatIf) -> list[Evidence]:
    cost, e = lean
    rank, step_us = t.rank, view.step_us
    cause = row_for_cost(cost).cause
    out = [arrival_evidence(t)]
    out.append(cost_evidence(cost, e, wall_excess(view, rank, cost), view.samples[rank], step_us, gain_us=w.gain_us))
    phase = phase_of(view, rank, cost) if cause_row(cause).phases else None
    if phase is not None:
        out.append(phase_evidence(view, rank, phase))
    blocked = float(np.mean(view.samples[rank].phases["communication_wait"]))
    out.append(wait_evidence(view.waits[rank], view.others_wait(rank), view.measured_wait, blocked))
    peers = [r for r in facts.ok if r.rank in t.peers]
    tables = {r.rank: name_times(r, cause, float(max(view.samples[r.rank].steps, 1))) for r in peers}
    return out + name_evidence(rank, cause, tables, step_us, 6)


def _under_floor(t: LastArrivals, w: WhatIf, step_us: float, cfg: DiagnosisConfig) -> str:
    """'rank 3 arrives last ... but running like its peers gains 9.6 ms per step (2.4%), under the 5% floor'."""
    return (
        f"rank {t.rank} arrives last at its peers' collectives in {t.last_steps} of {t.steps} steps (p = "
        f"{t.p_value:.2g}), but the replay with it running like its peers gains {w.gain_us / 1000:,.1f} ms per step "
        f"({100.0 * w.gain_us / step_us:.1f}% of the step), under the {cfg.min_slowdown_percent:g}% floor"
    )


def _slow_rank(view: JobView, facts: JobFacts, t: LastArrivals, cfg: DiagnosisConfig) -> SlowRank | str | None:
    """The rank named, or what it costs the job where that is under the user's floor (None: not named)."""
    lean = _leaning(view, t, cfg.noise_floor_percent / 100.0 * view.step_us)
    if lean is None:
        return None
    w = rank_what_if(facts, t.rank, host=lean[0] == "host")
    if w is None or not clears_noise(w, cfg.gain_noise_z):
        return None
    if w.gain_us < cfg.floor_us(view.step_us):
        return _under_floor(t, w, view.step_us, cfg)
    cost, e = lean
    gain = min(w.gain_us, 0.9 * view.step_us)
    return SlowRank(
        rank=t.rank,
        cause=row_for_cost(cost).cause,
        confidence=round(0.45 + 0.15 * t.last_steps / t.steps + 0.2 * (1.0 - t.p_value / cfg.consistency_alpha), 2),
        slowdown_pct=round(100.0 * gain / (view.step_us - gain), 1),
        excess_us=round(gain, 1),
        phase=phase_of(view, t.rank, cost) if cause_row(row_for_cost(cost).cause).phases else None,
        effect_z=round(e.z, 1),
        node=facts.node_of.get(t.rank),
        evidence=_evidence(view, facts, t, lean, w),
    )


def _peers(t: LastArrivals, layout: Layout | None) -> bool:
    """The group's members are peers: all in one pipeline stage (any group without stages)."""
    if layout is None or layout.stages < 2:
        return True
    return len({layout.stage.get(r, -1) for r in t.peers}) == 1


def arrival_stragglers(facts: JobFacts, settings: DiagnosisConfig) -> tuple[list[SlowRank], tuple[str, ...]]:
    """The ranks named by the order their peers arrive in at the collectives (see the module docstring), with the
    ranks that wait for them; and those the test names whose replayed gain is under the user's floor, in words."""
    tests = [t for t in last_arrival_tests(facts.arrivals) if t.p_value <= settings.consistency_alpha]
    tests = [t for t in tests if _peers(t, facts.layout)]
    if not tests:
        return [], ()
    view = job_view(facts.ok)
    found = [_slow_rank(view, facts, t, settings) for t in tests]
    slow = [s for s in found if isinstance(s, SlowRank)]
    return with_waiters(slow, facts.waits, STANDSTILL), tuple(s for s in found if isinstance(s, str))
