"""The noise-aware test of one cost of one rank against the other ranks, over the recorded steps. Pure.

For a cost (compute, host, ...) every rank has one sample per recorded step. For rank r:
- excess: the median of r's samples minus the median of the other ranks' medians (µs per step);
- noise: how far a healthy rank's median strays from the others', measured on this job, from
  * the rank-to-rank spread of the ranks' medians: scaled MAD over every rank (robust to a few outliers, and not
    fooled by three others that happen to agree); when stragglers are many among few ranks they widen it, so the
    spread of the ranks that wait for others (no straggler among them), widened by half for its small sample,
    bounds it; on CPU ranks it is at least the typical residual of the CPU-contention correction (what it may
    have missed: rank_costs' share of the stretch taken out, smaller where the wait was measured). With fewer than
    four ranks it cannot be measured: the step-to-step spread and, for each rank, its own residual stand in for it;
  * the step-to-step spread of the ranks' samples around their own medians (scaled MAD of the pooled deviations),
    as the standard error of a median of r's steps; and at least a floor (0.5% of the median step);
- effect size z = excess / noise (a robust z-score);
- consistency: a one-sided sign test over r's steps: in how many of them the cost exceeds the others' median,
  and the binomial probability of at least that many by chance (p = 0.5 per step).
A cost stands out when z reaches the outlier threshold, the sign test holds (p <= alpha; with too few steps for
that, every step must exceed) and the excess reaches the user's floor (a share of the median step).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, sqrt

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.stats import MAD_TO_SIGMA, medians_of_others

F64 = npt.NDArray[np.float64]
MEDIAN_SE = 1.2533
"""standard error of a median of n normal samples: 1.2533 * sigma / sqrt(n)"""
MIN_RANKS_FOR_SPREAD = 4
"""below this many ranks the rank-to-rank spread is not measured"""
SMALL_SAMPLE_SPREAD = 1.5
"""the spread measured on the few ranks that wait for others is widened by this much (a small sample)"""


@dataclass(frozen=True)
class Effect:
    rank: int
    excess_us: float
    noise_us: float
    z: float
    steps_above: int
    steps: int
    p_value: float
    reference_us: float
    value_us: float

    def consistent(self, alpha: float) -> bool:
        return self.p_value <= alpha or (self.steps > 0 and self.steps_above == self.steps)


def sign_test(above: int, n: int) -> float:
    """P(X >= above) for X ~ Binomial(n, 1/2)."""
    if n <= 0:
        return 1.0
    return sum(comb(n, k) for k in range(above, n + 1)) / 2.0**n


def _mad_sigma(values: F64) -> float:
    if values.size == 0:
        return 0.0
    return MAD_TO_SIGMA * float(np.median(np.abs(values - np.median(values))))


def _between(medians: F64, ranks: list[int], waiting: set[int] | None, within: float, residual: float) -> float:
    """The rank-to-rank spread of healthy ranks' medians (see the module docstring)."""
    if len(ranks) < MIN_RANKS_FOR_SPREAD:
        return max(within, residual)
    spread = _mad_sigma(medians)
    calm = [m for r, m in zip(ranks, medians.tolist(), strict=True) if waiting is not None and r in waiting]
    if len(calm) >= 2:
        spread = min(spread, SMALL_SAMPLE_SPREAD * _mad_sigma(np.asarray(calm)))
    return max(spread, residual)


def effects(
    samples: dict[int, F64],
    floor_us: float,
    residual: dict[int, float] | None = None,
    waiting: set[int] | None = None,
) -> list[Effect]:
    """The effect of every rank on one cost; `floor_us` bounds the noise from below (a measurement floor);
    `residual` (µs per step of CPU-contention stretch that may remain in each rank's samples after the correction)
    bounds the rank-to-rank noise; `waiting`: the ranks that wait for others (no straggler among them)."""
    ranks = sorted(r for r in samples if samples[r].size)
    if len(ranks) < 2:
        return []
    medians = np.asarray([float(np.median(samples[r])) for r in ranks])
    references = medians_of_others(medians)
    within = _mad_sigma(np.concatenate([samples[r] - m for r, m in zip(ranks, medians, strict=True)]))
    typical = float(np.median([residual.get(r, 0.0) for r in ranks])) if residual else 0.0
    between = _between(medians, ranks, waiting, within, typical)
    out: list[Effect] = []
    for r, value, reference in zip(ranks, medians.tolist(), references.tolist(), strict=True):
        n = samples[r].size
        spread = between
        if residual and len(ranks) < MIN_RANKS_FOR_SPREAD:
            spread = max(between, residual.get(r, 0.0))
        noise = max(sqrt(spread**2 + (MEDIAN_SE * within) ** 2 / n), floor_us, 1e-9)
        above = int(np.count_nonzero(samples[r] > reference))
        out.append(
            Effect(
                rank=r,
                excess_us=value - reference,
                noise_us=noise,
                z=(value - reference) / noise,
                steps_above=above,
                steps=n,
                p_value=sign_test(above, n),
                reference_us=reference,
                value_us=value,
            )
        )
    return out
