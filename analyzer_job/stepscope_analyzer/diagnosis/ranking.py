"""What the detectors found, ranked: each finding's gain from the replay of the recorded steps with its work set
to its peers' median (diagnosis.replay with a pipeline layout, diagnosis.dp_replay without), the largest first, and
the job's numbers (the expected step and the speedup) from the same replay. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.dp_replay import dp_what_ifs
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers, step_numbers
from stepscope_analyzer.diagnosis.replay import what_ifs, with_replayed_gains
from stepscope_analyzer.diagnosis.replayed_gain import replay_base, with_replayed_gain
from stepscope_analyzer.diagnosis.shape_verdict import with_finding_numbers
from stepscope_contract.report import JobFinding, SlowRank, WhatIf


@dataclass(frozen=True)
class Ranked:
    slow: list[SlowRank]
    findings: list[JobFinding]
    """the largest replayed gain first"""
    numbers: StepNumbers
    what_ifs: list[WhatIf]


def ranked(facts: JobFacts, found: Found) -> Ranked:
    slow = list(found.slow_ranks)
    numbers = step_numbers(facts.ok, slow)
    working = [s.rank for s in slow if s.cause not in STANDSTILL]
    step_us = replay_base(numbers)
    if facts.layout is not None:
        whatifs = what_ifs(facts.step_work, working, step_us)
    else:
        whatifs = dp_what_ifs(facts.ok, working, step_us)
    findings = sorted(with_replayed_gains(list(found.findings), whatifs), key=lambda f: -f.gain_us)
    numbers = with_finding_numbers(with_replayed_gain(numbers, whatifs), findings, slow, facts.hang.hangs)
    return Ranked(slow, findings, numbers, whatifs)
