"""What the detectors found, ranked by one number: what a replay of the recorded steps saves when the finding's
work is set to its peers' median (diagnosis.replay with a pipeline layout, diagnosis.dp_replay without), with its
noise interval over the steps. A slow rank's excess becomes its replayed saving where it was replayed, so the
verdict's excess, its "x faster", the report's gain sentence, the what-if table and the evidence quote one figure;
findings (a stage, the schedule, the data, a group) are ordered by theirs, the largest first. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.dp_replay import dp_what_ifs
from stepscope_analyzer.diagnosis.evidence import with_saving
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers, step_numbers
from stepscope_analyzer.diagnosis.replay import what_ifs, with_replayed_gains
from stepscope_analyzer.diagnosis.replayed_gain import replay_base, with_replayed_gain
from stepscope_analyzer.diagnosis.shape_verdict import with_finding_numbers
from stepscope_contract.report import Cause, JobFinding, SlowRank, WhatIf

REPLAYED = "replayed"
"""how the saving clause names the replay's figure"""


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


def with_replayed_excess(slow: list[SlowRank], whatifs: list[WhatIf], step_us: float) -> list[SlowRank]:
    """The one slow rank whose what-if was replayed and saves time, with that saving as its excess (and its slowdown
    and evidence to match). With several slow ranks each one's replay alone saves only what the others leave (the
    step still waits for them): their excesses stay their own, and the job's gain is their combined what-if's."""
    working = [s for s in slow if s.cause not in STANDSTILL]
    if len(working) != 1:
        return slow
    out = []
    for s in slow:
        w = _like_peers(whatifs, s.rank) if s.cause not in STANDSTILL else None
        if w is None or w.gain_us <= 0 or step_us <= 0:
            out.append(s)
            continue
        gain = min(w.gain_us, 0.9 * step_us)
        out.append(
            s.model_copy(
                update={
                    "excess_us": round(gain, 1),
                    "slowdown_pct": round(100.0 * gain / (step_us - gain), 1),
                    "evidence": with_saving(s.evidence, gain, REPLAYED),
                }
            )
        )
    return out


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
    if facts.layout is not None:
        host = frozenset(s.rank for s in slow if s.cause is Cause.HOST)
        whatifs = what_ifs(facts.step_work, working, step_us, host)
    else:
        whatifs = dp_what_ifs(facts.ok, working, step_us)
    slow = with_replayed_excess(slow, whatifs, step_us)
    findings = _rank_gains(with_replayed_gains(list(found.findings), whatifs), slow)
    findings = sorted(findings, key=lambda f: -f.gain_us)
    numbers = with_finding_numbers(with_replayed_gain(numbers, whatifs), findings, slow, facts.hang.hangs)
    return Ranked(slow, findings, numbers, whatifs)
