"""Each of several slow ranks' share of the job's replayed gain. Pure.

With several slow ranks, what fixing one of them saves depends on the others: in a data-parallel step the slowest
rank holds the step, so fixing the second slowest alone saves nothing, and fixing the slowest alone saves only what
the second leaves. Neither rank's own replay nor its own excess adds up to the gain of fixing them all. Each rank's
share is its Shapley value over the replays of every subset of the slow ranks (each what-if replayed as
diagnosis.replay and diagnosis.dp_replay replay one): its added saving when it joins the fixed ones, averaged over
every order of fixing them. The shares add up to the replayed gain of fixing them all, so the verdict's excesses,
the job's gain and its "x faster" quote one set of figures. With more than MAX_SHARED slow ranks (2^n replays) no
shares are computed.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from math import factorial

MAX_SHARED = 5
"""at most this many slow ranks are shared out (2^n subset replays)"""

GainOf = Callable[[list[int]], float]
"""the replayed saving per step (the mean over the recorded steps) of these ranks running like their peers"""


def gain_shares(ranks: list[int], gain_of: GainOf) -> dict[int, float]:
    """Each rank's Shapley share of `gain_of(ranks)`; empty for fewer than two ranks or more than MAX_SHARED."""
    ranks = sorted(set(ranks))
    n = len(ranks)
    if n < 2 or n > MAX_SHARED:
        return {}
    gains: dict[tuple[int, ...], float] = {(): 0.0}
    for size in range(1, n + 1):
        for subset in combinations(ranks, size):
            gains[subset] = gain_of(list(subset))
    shares = {}
    for rank in ranks:
        others = [r for r in ranks if r != rank]
        total = 0.0
        for size in range(n):
            weight = factorial(size) * factorial(n - size - 1) / factorial(n)
            for subset in combinations(others, size):
                joined = tuple(sorted((*subset, rank)))
                total += weight * (gains[joined] - gains[subset])
        shares[rank] = total
    return shares
