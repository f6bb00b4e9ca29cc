"""What the detectors found, ranked by one number: what a replay of the recorded steps saves when the finding's
work is set to its peers' median (diagnosis.replay with a pipeline layout, diagnosis.dp_replay without), with its
noise interval over the steps. A slow rank's excess becomes its replayed saving where it was replayed (with several
slow ranks, its share of their combined saving: diagnosis.gain_shares), so the
verdict's excess, its "x faster", the report's gain sentence, the what-if table and the evidence quote one figure;
findings (a stage, the schedule, the data, a group) are ordered by theirs, the largest first. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.dp_replay import dp_gain_of, dp_what_ifs
from stepscope_analyzer.diagnosis.evidence import with_saving
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.gain_shares import gain_shares
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers, step_numbers
from stepscope_analyzer.diagnosis.replay import pipeline_gain_of, what_ifs, with_replayed_gains
from stepscope_analyzer.diagnosis.replayed_gain import replay_base, with_replayed_gain
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
        gain_of = dp_gain_of(facts.ok)
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


def ranked(facts: JobFacts, found: Found) -> Ranked:
    slow = list(found.slow_ranks)
    numbers = step_numbers(facts.ok, slow)
    working = [s.rank for s in slow if s.cause not in STANDSTILL]
    step_us = replay_base(numbers)
    host = frozenset(s.rank for s in slow if s.cause is Cause.HOST)
    if facts.layout is not None:
        whatifs = what_ifs(facts.step_work, working, step_us, host)
    else:
        whatifs = dp_what_ifs(facts.ok, working, step_us)
    slow = with_replayed_excess(slow, whatifs, step_us, _shares(facts, working, host))
    findings = _rank_gains(with_replayed_gains(list(found.findings), whatifs), slow)
    findings = sorted(findings, key=lambda f: -f.gain_us)
    numbers = with_finding_numbers(with_replayed_gain(numbers, whatifs), findings, slow, facts.hang.hangs)
    return Ranked(slow, findings, numbers, whatifs)
