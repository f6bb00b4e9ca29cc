"""What the detectors found, ranked by one number: what a replay of the recorded steps saves when the finding's
work is set to its peers' median (diagnosis.replay with a pipeline layout, diagnosis.dp_replay without), with its
noise interval over the steps. A slow rank's excess becomes its replayed saving where it was replayed (with several
slow ranks, its share of their combined saving: diagnosis.gain_shares), so the
verdict's excess, its "x faster", the report's gain sentence, the what-if table and the evidence quote one figure;
findings (a stage, the schedule, the data, a group) are ordered by theirs, the largest first. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.dp_replay import ALL_LIKE_PEERS, dp_gain_of, dp_what_ifs
from stepscope_analyzer.diagnosis.evidence import with_saving
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.gain_shares import gain_shares
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers, step_numbers
from stepscope_analyzer.diagnosis.replay import REPLAYED as REPLAYED_WHAT_IF
from stepscope_analyzer.diagnosis.replay import pipeline_gain_of, what_ifs, with_replayed_gains
from stepscope_analyzer.diagnosis.replayed_gain import clears_noise, replay_base, with_replayed_gain
from stepscope_analyzer.diagnosis.shape_verdict import with_finding_numbers
from stepscope_contract.report import Cause, JobFinding, SlowRank, WhatIf

REPLAYED = "replayed"
"""how the saving clause names the replay's figure"""
SHARED = "its share of the replayed gain of every slow rank"
"""... and a rank's share of several slow ranks' gain"""


@dataclass(frozen=True)
class Ranked:
    slow: list[SlowRank]
    """as the detectors ordered them (the largest excess first)"""
    findings: list[JobFinding]
    """the largest replayed gain first"""
    numbers: StepNumbers
    what_ifs: list[WhatIf]


def _like_peers(whatifs: list[WhatIf], rank: int) -> WhatIf | None:
    change = f"rank {rank} ran like its peers"
    return next((w for w in whatifs if w.kind == "like_peers" and w.change == change), None)


def _with_gain(s: SlowRank, gain: float, step_us: float, how: str) -> SlowRank:
    gain = min(gain, 0.9 * step_us)
    return s.model_copy(
        update={
            "excess_us": round(gain, 1),
            "slowdown_pct": round(100.0 * gain / (step_us - gain), 1),
            "evidence": with_saving(s.evidence, gain, how),
        }
    )


def with_replayed_excess(
    slow: list[SlowRank], whatifs: list[WhatIf], step_us: float, shares: dict[int, float] | None = None
) -> list[SlowRank]:
    """The one slow rank whose what-if was replayed and saves time, with that saving as its excess (and its slowdown
    and evidence to match). With several slow ranks each one's replay alone saves only what the others leave (the
    step still waits for them): each takes its share of their combined what-if's gain (`shares`,
    diagnosis.gain_shares), where it has one and it is positive; else its excess stays its own."""
    working = [s for s in slow if s.cause not in STANDSTILL]
    if step_us <= 0 or not working:
        return slow
    out = []
    for s in slow:
        if s.cause in STANDSTILL:
            out.append(s)
        elif len(working) > 1:
            share = (shares or {}).get(s.rank, 0.0)
            out.append(_with_gain(s, share, step_us, SHARED) if share > 0 else s)
        else:
            w = _like_peers(whatifs, s.rank)
            out.append(_with_gain(s, w.gain_us, step_us, REPLAYED) if w is not None and w.gain_us > 0 else s)
    return out


def _shares(facts: JobFacts, working: list[int], host: frozenset[int]) -> dict[int, float]:
    """Each slow rank's share of their combined replayed gain (diagnosis.gain_shares), where the job replays."""
    if len(working) < 2:
        return {}
    if facts.layout is not None:
        job = facts.step_work
        gain_of = pipeline_gain_of(job, host) if job is not None else None
    else:
        gain_of = dp_gain_of(facts.dp_work) if facts.dp_work is not None else None
    return gain_shares(working, gain_of) if gain_of is not None else {}


def _rank_gains(findings: list[JobFinding], slow: list[SlowRank]) -> list[JobFinding]:
    """A finding about one slow rank's own excess (a tensor-parallel group's straggler, a throttled GPU) gains what
    that rank's replay saves."""
    excess = {s.rank: s.excess_us for s in slow}
    out = []
    for f in findings:
        rank = _one_slow_rank(f, excess)
        out.append(f.model_copy(update={"gain_us": excess[rank]}) if rank is not None else f)
    return out


def _one_slow_rank(f: JobFinding, excess: dict[int, float]) -> int | None:
    if f.cause not in (Cause.TP_STRAGGLER, Cause.GPU_THROTTLE):
        return None
    mine = [r for r in f.ranks if r in excess]
    return mine[0] if len(mine) == 1 else None


def _not_cleared(
    slow: list[SlowRank], findings: list[JobFinding], whatifs: list[WhatIf], shares: dict[int, float], z: float
) -> tuple[set[int], set[Cause]]:
    """The slow ranks and the findings whose replayed gain does not clear its noise (clears_noise), the same rule
    in every layout: one slow rank by its own what-if, several by their combined one and each by its share (a rank
    whose share is nothing adds nothing in any order of fixing them); a finding by the what-if whose gain is its.
    What was not replayed keeps its detector's verdict."""
    working = [s.rank for s in slow if s.cause not in STANDSTILL]
    by_kind = {w.kind: w for w in whatifs}
    ranks: set[int] = set()
    if len(working) == 1:
        w = _like_peers(whatifs, working[0])
        ranks = {working[0]} if w is not None and not clears_noise(w, z) else set()
    elif len(working) > 1 and (w := by_kind.get(ALL_LIKE_PEERS)) is not None:
        ranks = set(working) if not clears_noise(w, z) else {r for r in working if r in shares and shares[r] <= 0}
    causes = set()
    for f in findings:
        kind = REPLAYED_WHAT_IF.get(f.cause)
        w = by_kind.get(kind) if kind is not None else None
        if w is not None and not clears_noise(w, z):
            causes.add(f.cause)
    return ranks, causes


def _what_ifs(facts: JobFacts, working: list[int], step_us: float, host: frozenset[int]) -> list[WhatIf]:
    if facts.layout is not None:
        return what_ifs(facts.step_work, working, step_us, host)
    return dp_what_ifs(facts.dp_work, working, step_us)


def rank_what_if(facts: JobFacts, rank: int, host: bool = False) -> WhatIf | None:
    """The replayed what-if of `rank` running like its peers (its host work, with `host`) as the ranking replays
    it, on the job's median step; None where nothing is replayed."""
    return _like_peers(_what_ifs(facts, [rank], facts.numbers.median_step_us, frozenset({rank} if host else ())), rank)


def _ranked(facts: JobFacts, slow: list[SlowRank], found_findings: list[JobFinding], z: float) -> tuple[Ranked, bool]:
    """The ranking of `slow` and the findings, and whether every one of them cleared its noise."""
    numbers = step_numbers(facts.ok, slow)
    working = [s.rank for s in slow if s.cause not in STANDSTILL]
    step_us = replay_base(numbers)
    host = frozenset(s.rank for s in slow if s.cause is Cause.HOST)
    whatifs = _what_ifs(facts, working, step_us, host)
    shares = _shares(facts, working, host)
    drop_ranks, drop_causes = _not_cleared(slow, found_findings, whatifs, shares, z)
    if drop_ranks or drop_causes:
        kept = [s for s in slow if s.rank not in drop_ranks or s.cause in STANDSTILL]
        return Ranked(kept, [f for f in found_findings if f.cause not in drop_causes], numbers, whatifs), False
    slow = with_replayed_excess(slow, whatifs, step_us, shares)
    findings = _rank_gains(with_replayed_gains(found_findings, whatifs), slow)
    findings = sorted(findings, key=lambda f: -f.gain_us)
    numbers = with_finding_numbers(with_replayed_gain(numbers, whatifs), findings, slow, facts.hang.hangs)
    return Ranked(slow, findings, numbers, whatifs), True


def ranked(facts: JobFacts, found: Found, settings: DiagnosisConfig | None = None) -> Ranked:
    """The findings ranked by their replayed gain, without those whose gain does not clear its noise
    (DiagnosisConfig.gain_noise_z); the ranking is replayed again for those that remain, until every one clears it
    (each pass that does not drops at least one slow rank or finding, so this ends)."""
    z = (settings or DiagnosisConfig()).gain_noise_z
    r, cleared = _ranked(facts, list(found.slow_ranks), list(found.findings), z)
    while not cleared:
        r, cleared = _ranked(facts, r.slow, r.findings, z)
    return r
