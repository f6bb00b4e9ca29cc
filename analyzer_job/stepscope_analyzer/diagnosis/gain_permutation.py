"""Does the replay save time for one peer more often and by more than chance would? A permutation test over the
recorded steps, without a threshold of its own. Pure.

In every recorded step the data-parallel replay (diagnosis.dp_replay) saves time for whichever peer did the most
work that step: setting that peer's work to the median of the others' shortens the step by its lead. A balanced job
therefore has a positive `like_peers` gain for every rank that was ever the heaviest, and the gain alone names no
rank. What chance does not do is give the same rank the larger savings step after step. Under the null hypothesis
that the peers are exchangeable (no rank slower than the others, only noise), the assignment of the step's work
values to the ranks is a random permutation in each step, independently of the other steps, so a given rank's
saving in a step is any one of the step's per-value savings with equal chance. Its summed saving over the steps is
then a sum of independent draws, one per step; the p-value is the share of that distribution at or above the
summed saving observed, multiplied by the number of ranks tested (Bonferroni). The distribution is enumerated
exactly up to MAX_EXACT combinations and sampled (SAMPLES draws, a fixed seed: the same answer on every run) beyond.

Unlike the order ranks arrive in (diagnosis.arrival_order) it weighs magnitudes: among four peers over five steps,
a rank that is much the heaviest in four steps and level in the fifth has p = 4 x 0.25^4 = 0.016 over the ranks,
where being the step's last in four of five has the binomial tail's 4 x 0.0156 = 0.0625.
It asks the replayed wall-clock work, so it says who the job waits for, not why: the detector that uses it
(diagnosis.arrival_stragglers) asks a cost that leans the same way, and the gain to clear its noise and the floor.
Four peers at least (MIN_RANKS_FOR_SPREAD), as for the arrival order: of two, one is the heaviest in every step, and
which one is what the cost tests judge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.straggler_test import MIN_RANKS_FOR_SPREAD

F64 = npt.NDArray[np.float64]
MAX_EXACT = 1 << 16
"""combinations (peers ** steps) enumerated exactly; beyond, the distribution is sampled"""
SAMPLES = 1 << 16
SEED = 46


@dataclass(frozen=True)
class GainTest:
    """One rank's replayed saving against the savings chance would give it."""

    rank: int
    peers: tuple[int, ...]
    saved_us: float
    """mean replayed saving per step with it running like its peers"""
    heaviest_steps: int
    """steps in which its saving was the step's largest (it did the most work)"""
    steps: int
    p_value: float
    """the chance of a summed saving this large among exchangeable peers, times the ranks tested"""


def step_savings(work: F64) -> F64:
    """(ranks x steps) work -> each (rank, step)'s saving: the step's longest work less the longest with that rank's
    work set to the median of the others' (diagnosis.dp_replay's `like_peers`, step by step). The others' median is
    at most their longest, so only the step's heaviest rank saves anything: its lead over the next heaviest."""
    out = np.zeros_like(work)
    if work.shape[0] < 2:
        return out
    steps = np.arange(work.shape[1])
    top = np.argmax(work, axis=0)
    two = np.sort(work, axis=0)[-2:]
    out[top, steps] = two[1] - two[0]
    return out


def _null_sums(savings: F64) -> F64:
    """The summed saving of a rank drawn at random in every step: every combination where there are few, else a
    fixed-seed sample."""
    ranks, steps = savings.shape
    if ranks**steps <= MAX_EXACT:
        sums = np.zeros(1)
        for t in range(steps):
            sums = (sums[:, None] + savings[:, t][None, :]).ravel()
        return sums
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, ranks, size=(SAMPLES, steps))
    drawn: F64 = savings[picks, np.arange(steps)].sum(axis=1)
    return drawn


def gain_permutation_tests(work: dict[int, list[float]], min_peers: int = MIN_RANKS_FOR_SPREAD) -> list[GainTest]:
    """Every rank of a job of at least `min_peers` ranks with the same recorded steps (rank -> work per step, as
    the replay takes it), with its permutation p-value (module docstring), the least likely first."""
    ranks = sorted(work)
    lengths = {len(work[r]) for r in ranks}
    if len(ranks) < min_peers or len(lengths) != 1 or 0 in lengths:
        return []
    table = np.asarray([work[r] for r in ranks], dtype=np.float64)
    savings = step_savings(table)
    null = np.sort(_null_sums(savings))
    observed = savings.sum(axis=1)
    tol = 1e-9 * max(1.0, float(np.abs(observed).max()))
    at_least = null.size - np.searchsorted(null, observed - tol, side="left")
    exact = len(ranks) ** table.shape[1] <= MAX_EXACT
    share = at_least / null.size if exact else (at_least + 1) / (null.size + 1)
    heaviest = np.bincount(np.argmax(table, axis=0), minlength=len(ranks))
    steps = table.shape[1]
    p_values = np.minimum(1.0, len(ranks) * share)
    peers = tuple(ranks)
    out = [
        GainTest(r, peers, float(observed[i]) / steps, int(heaviest[i]), steps, float(p_values[i]))
        for i, r in enumerate(ranks)
    ]
    out.sort(key=lambda t: (t.p_value, t.rank))
    return out
