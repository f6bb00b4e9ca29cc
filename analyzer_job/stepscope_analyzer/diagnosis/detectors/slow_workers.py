"""Compute, host, memory and communication: ranks slower than their peers in one of their costs
(diagnosis.peers, diagnosis.slow_ranks; in a job without a layout, with the data-parallel replay's saving for a rank
above its peers in every step), with the ranks that wait for them; where no cost names one and nothing
stands still, the rank its peers wait for at their collectives step after step, whose cost leans the same way
(diagnosis.arrival_stragglers). A rank whose cost stands out and whose peers wait for it, but whose gain is under
the user's floor, is said in the verdict instead of named (Found.under_floor), once per rank (the arrival test's
sentence, which quotes the replay's gain, where it speaks of the rank). Pure."""

from __future__ import annotations

import functools

from stepscope_analyzer.diagnosis.arrival_stragglers import arrival_stragglers
from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.peers import find_slow_peers
from stepscope_analyzer.diagnosis.ranking import rank_what_if
from stepscope_analyzer.diagnosis.waits import with_waiters


def detect(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    hung = facts.hung
    under: dict[int, str] = {}
    replayed = functools.partial(rank_what_if, facts) if facts.layout is None else None  # the data-parallel replay
    slow = find_slow_peers([r for r in facts.ok if r.rank not in hung], settings, facts.layout, under, replayed)
    slow = [s if s.node else s.model_copy(update={"node": facts.node_of.get(s.rank)}) for s in slow]
    if not slow and not hung and not facts.found.slow_ranks:
        late, arrivals = arrival_stragglers(facts, settings)
        mine = (words for rank, words in under.items() if rank not in arrivals)  # theirs quote the replay's gain
        return Found(slow_ranks=tuple(late), under_floor=(*arrivals.values(), *mine))
    return Found(slow_ranks=tuple(with_waiters(slow, facts.waits, STANDSTILL)))
