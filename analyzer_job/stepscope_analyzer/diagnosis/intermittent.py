"""The test of one cost of one rank for intermittent stalls: a few recorded steps where this rank alone takes far
longer (a checkpoint, an evaluation or a log flush every few steps, a periodic garbage collection). Pure.

The median that straggler_test compares is blind to them by design (it is robust to a few odd steps), yet the job
pays for every one: the other ranks wait in their next collective. Steps are compared where they line up: in a
synchronised job step N of one rank is held against the median of the other ranks at step N (by ProfilerStep
number where every rank's steps are numbered, else by position when every rank recorded as many steps).
- step excess: rank r's cost at step s minus the median of the other ranks' cost at that step; a stall stands out
  against the rank's own ordinary steps, so each rank's excesses are taken above its own ordinary level, their
  lower quartile and at least 0 (stalls are at most half of its steps, so the quartile is among its ordinary
  ones; a rank slower in every step, whose excess wanders around some level, is the median test's);
- step noise: the scaled MAD of those, every rank's pooled (most steps of a job are ordinary, so this is the
  ordinary step-to-step, rank-to-rank scatter; at least a floor);
- a spike: a step excess above the rank's ordinary level of at least `threshold` times the step noise (on the cost
  without CPU-contention stretches) and of at least `spike_floor_us` in wall-clock time;
- a rank stalls intermittently when its spikes repeat (at least MIN_SPIKES; one odd step is a hiccup, not a
  pattern) in at most half of the steps (more is a straggler whose median shows it) and hold most of the job's
  spike time for this cost (at least DOMINANT_SHARE of every rank's wall-clock spike excess summed: on a shared
  CPU the scheduler's stretches land on every rank in turn).
The caller tests each cost, and a rank's own time (compute + host) for a stall split between them.
The job pays the rank's mean step excess over the window (all its steps, the ordinary ones included), which is
what the caller compares with the user's floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.stats import MAD_TO_SIGMA

F64 = npt.NDArray[np.float64]
MIN_SPIKES = 2
"""a stall must recur in the window to be a pattern"""
MIN_STEPS = 4
"""fewer aligned steps than this cannot show a pattern beside ordinary steps"""
MAX_SPIKED_SHARE = 0.5
"""at most this share of the steps: a rank slower in most steps is straggler_test's (its median shows it)"""
DOMINANT_SHARE = 0.5
"""the rank's share of all ranks' spike excess (for this cost) it must hold"""
ORDINARY_QUANTILE = 25.0
"""a rank's ordinary step excess: this percentile of its step excesses"""
STALL_SHARE = 0.5
"""a spike is at least this share of the job's median step: the stalls this test is for (checkpoints,
evaluations, collector pauses) take a good part of a step or more, while a shared CPU's scheduler stretches a
step by less (the project's balanced CPU jobs, 2 to 16 ranks on 2 cores: at most ~0.3 of a step on one rank)"""


@dataclass(frozen=True)
class Stall:
    rank: int
    stalled: tuple[int, ...]
    """indexes (into this rank's recorded steps) of the steps in which its excess stood out"""
    numbers: tuple[int, ...]
    """their step numbers (ProfilerStep#N), where known"""
    steps: int
    """the steps compared (that line up across ranks)"""
    mean_excess_us: float
    """the rank's step excess averaged over every recorded step, without CPU-contention stretches"""
    wall_mean_excess_us: float
    """the same in wall-clock time: what the job pays per step"""
    spike_excess_us: float
    """the median wall-clock excess of the steps that stood out (one stall's size)"""
    noise_us: float
    z: float
    """the stalls' median excess (without stretches) over the step noise"""
    share: float
    """this rank's share of all ranks' spike excess"""

    @property
    def spikes(self) -> int:
        return len(self.stalled)


Numbers = dict[int, tuple[int, ...]]
"""rank -> each recorded step's number (ProfilerStep#N), empty where unknown"""


def aligned_steps(samples: dict[int, F64], numbers: Numbers | None = None) -> dict[int, npt.NDArray[np.int64]] | None:
    """Per rank, the positions of its samples that line up across ranks, column by column: the steps every rank
    recorded, by step number where every rank's steps are numbered (ranks that started recording at different
    steps still line up), else by position when every rank recorded as many steps; None when fewer than
    MIN_STEPS line up."""
    ranks = sorted(samples)
    if len(ranks) < 2:
        return None
    known = numbers or {}
    if all(len(known.get(r, ())) == samples[r].size for r in ranks):
        common = sorted(set.intersection(*(set(known[r]) for r in ranks)))
        if len(common) >= MIN_STEPS:
            at = {r: {n: i for i, n in enumerate(known[r])} for r in ranks}
            return {r: np.asarray([at[r][n] for n in common], dtype=np.int64) for r in ranks}
    sizes = {samples[r].size for r in ranks}
    if len(sizes) == 1 and next(iter(sizes)) >= MIN_STEPS:
        return {r: np.arange(samples[r].size, dtype=np.int64) for r in ranks}
    return None


def step_excess(
    samples: dict[int, F64], numbers: Numbers | None = None
) -> tuple[list[int], F64, dict[int, npt.NDArray[np.int64]]] | None:
    """(ranks, matrix ranks x aligned steps of each rank's excess over the other ranks' median at the same step,
    the positions of each column in each rank's own samples), or None when the steps do not line up."""
    at = aligned_steps(samples, numbers)
    if at is None:
        return None
    ranks = sorted(samples)
    x = np.vstack([samples[r][at[r]] for r in ranks])
    if len(ranks) == 2:
        ref = x[::-1]
    else:
        ref = np.vstack([np.median(np.delete(x, i, axis=0), axis=0) for i in range(len(ranks))])
    return ranks, x - ref, at


def rank_excess(samples: dict[int, F64], rank: int, numbers: Numbers | None = None) -> F64:
    """`rank`'s excess over the other ranks at each of its own recorded steps (NaN where a step does not line up
    with the other ranks'; empty when no steps line up)."""
    aligned = step_excess(samples, numbers)
    if aligned is None or rank not in aligned[0]:
        return np.zeros(0)
    ranks, excess, at = aligned
    row: F64 = np.full(samples[rank].size, np.nan)
    row[at[rank]] = excess[ranks.index(rank)]
    return row


def _ordinary(excess: F64) -> F64:
    """Each rank's ordinary step excess (a column): the lower quartile of its step excesses, never below 0 (with two
    ranks the other rank's stalls mirror as dips, which are not its ordinary level)."""
    level: F64 = np.maximum(np.percentile(excess, ORDINARY_QUANTILE, axis=1, keepdims=True), 0.0)
    return level


def stalls(
    tested: dict[int, F64],
    wall: dict[int, F64],
    threshold: float,
    spike_floor_us: float,
    noise_floor_us: float,
    *,
    numbers: Numbers | None = None,
) -> list[Stall]:
    """The ranks that stall intermittently on one cost (see the module docstring); empty when steps do not line
    up. `tested`: the cost without CPU-contention stretches, where a spike must reach `threshold` times the step
    noise; `wall`: the same in wall-clock time, where it must reach `spike_floor_us` (STALL_SHARE of a step: the
    contention correction stretches nothing back, and a sleep is not stretched by a busy CPU, yet the correction
    divides it too)."""
    aligned, in_wall = step_excess(tested, numbers), step_excess(wall, numbers)
    if aligned is None or in_wall is None or aligned[0] != in_wall[0]:
        return []
    ranks, excess, at = aligned
    wall_excess = in_wall[1]
    # a stall stands out against the rank's own ordinary steps: a rank slower in every step whose excess merely
    # wanders across the floor is the median test's, not a staller
    above = excess - _ordinary(excess)
    wall_above = wall_excess - _ordinary(wall_excess)
    noise = max(MAD_TO_SIGMA * float(np.median(np.abs(above - np.median(above)))), noise_floor_us, 1e-9)
    spiked = (above >= threshold * noise) & (wall_above >= spike_floor_us)
    total = float(wall_excess[spiked].sum())
    out: list[Stall] = []
    for i, rank in enumerate(ranks):
        mine = wall_excess[i][spiked[i]]
        if mine.size < MIN_SPIKES or mine.size > MAX_SPIKED_SHARE * excess.shape[1] or total <= 0:
            continue
        share = float(mine.sum()) / total
        if share < DOMINANT_SHARE:
            continue
        out.append(
            Stall(
                rank=rank,
                stalled=tuple(int(at[rank][k]) for k in np.flatnonzero(spiked[i])),
                numbers=tuple(numbers[rank][int(at[rank][k])] for k in np.flatnonzero(spiked[i]))
                if numbers and numbers.get(rank)
                else (),
                steps=int(excess.shape[1]),
                mean_excess_us=float(np.mean(excess[i])),
                wall_mean_excess_us=float(np.mean(wall_excess[i])),
                spike_excess_us=float(np.median(mine)),
                noise_us=noise,
                z=float(np.median(above[i][spiked[i]])) / noise,
                share=share,
            )
        )
    return out
