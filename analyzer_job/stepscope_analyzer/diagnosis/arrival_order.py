"""Which rank arrives last at its peers' collectives, step after step: a test without a threshold of its own. Pure.

Every member of a collective leaves it when the last one arrives (diagnosis.waits names that one in each matched
collective). Without a straggler, which of m exchangeable peers arrives last is chance: in each recorded step the
rank that arrives last at most of the step's matched collectives of the group (none on a tie) is the step's last,
and a given rank is that in at most 1/m of the steps. A rank that is the step's last in k of n steps has the
binomial tail P(X >= k), X ~ Binomial(n, 1/m), as its p-value, multiplied by the number of ranks tested (Bonferroni).
Steps, not collectives, are the samples: a rank late at a step's first bucket is late at its next one too.

The test needs at least four peers (MIN_RANKS_FOR_SPREAD): with two, one of them is always last, and which one is
what the cost tests already judge. It says who the others wait for, not what it costs them: the detector that
uses it (diagnosis.arrival_stragglers) asks a cost that leans the same way and the replayed gain for that.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from math import comb

from stepscope_analyzer.diagnosis.straggler_test import MIN_RANKS_FOR_SPREAD
from stepscope_analyzer.diagnosis.waits import Arrival


@dataclass(frozen=True)
class LastArrivals:
    """How often one rank was the last of its peers to arrive."""

    rank: int
    peers: tuple[int, ...]
    """the group's members, the rank among them"""
    last_steps: int
    """steps in which it arrived last at most of the group's matched collectives"""
    steps: int
    """steps with matched collectives of the group"""
    last_calls: int
    calls: int
    """matched collectives it arrived last at, of the group's"""
    p_value: float
    """the chance of being the step's last this often among exchangeable peers, times the ranks tested"""


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    return min(1.0, sum(comb(n, j) * p**j * (1.0 - p) ** (n - j) for j in range(k, n + 1)))


def _step_last(lasts: Counter[int]) -> int | None:
    """The rank that arrived last at most of a step's collectives; None on a tie."""
    top = lasts.most_common(2)
    if len(top) == 1 or top[0][1] > top[1][1]:
        return top[0][0]
    return None


def last_arrival_tests(arrivals: list[Arrival], min_peers: int = MIN_RANKS_FOR_SPREAD) -> list[LastArrivals]:
    """Every rank of a group of at least `min_peers` members, with how often it was its peers' last (see the
    module docstring), the least likely first."""
    by_group: dict[tuple[int, ...], dict[int, Counter[int]]] = defaultdict(lambda: defaultdict(Counter))
    for a in arrivals:
        if len(a.members) >= min_peers:
            by_group[a.members][a.step][a.last] += 1
    tested = sum(len(members) for members in by_group)
    out = []
    for members, steps in by_group.items():
        step_lasts = Counter(_step_last(lasts) for lasts in steps.values())
        calls = Counter[int]()
        for lasts in steps.values():
            calls.update(lasts)
        total = sum(calls.values())
        for rank in members:
            k, n = step_lasts.get(rank, 0), len(steps)
            p = min(1.0, tested * binomial_tail(k, n, 1.0 / len(members)))
            out.append(LastArrivals(rank, members, k, n, calls.get(rank, 0), total, p))
    out.sort(key=lambda t: (t.p_value, t.rank))
    return out
