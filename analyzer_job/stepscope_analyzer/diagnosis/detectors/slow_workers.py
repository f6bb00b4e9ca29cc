"""Compute, host, memory and communication: ranks slower than their peers in one of their costs
(diagnosis.peers, diagnosis.slow_ranks), with the ranks that wait for them; where no cost names one and nothing
stands still, the rank its peers wait for at their collectives step after step, whose cost leans the same way
(diagnosis.arrival_stragglers). A rank whose cost stands out and whose peers wait for it, but whose gain is under
the user's floor, is said in the verdict instead of named (Found.under_floor), once per rank (the arrival test's
sentence, which quotes the replay's gain, where it speaks of the rank). Pure."""

from __future__ import annotations

import re

from stepscope_analyzer.diagnosis.arrival_stragglers import arrival_stragglers
from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.peers import find_slow_peers
from stepscope_analyzer.diagnosis.waits import with_waiters


def _rank_of(sentence: str) -> int | None:
    """The rank an under-floor sentence is about ('rank 3 arrives last ...', "rank 3's compute ...")."""
    found = re.match(r"rank (\d+)\b", sentence)
    return int(found.group(1)) if found else None


def detect(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    hung = facts.hung
    under: list[str] = []
    slow = find_slow_peers([r for r in facts.ok if r.rank not in hung], settings, facts.layout, under)
    slow = [s if s.node else s.model_copy(update={"node": facts.node_of.get(s.rank)}) for s in slow]
    if not slow and not hung and not facts.found.slow_ranks:
        late, arrivals = arrival_stragglers(facts, settings)
        said = {_rank_of(x) for x in arrivals}  # the arrival test's sentence quotes the replay's gain: it goes first
        return Found(slow_ranks=tuple(late), under_floor=(*arrivals, *(x for x in under if _rank_of(x) not in said)))
    return Found(slow_ranks=tuple(with_waiters(slow, facts.waits, STANDSTILL)))
