"""How much slower or faster per call the work that did not change ran: the ops (on GPU ranks the kernels) present on
both sides with the same calls per step, with an interval. Pure.

Two recordings of the same code on a shared machine differ by whatever the machine did meanwhile (other tenants, CPU
frequency, a noisy neighbour): that moves every op's time per call together. A code change moves the ops it touches
(new calls, other shapes, a slower kernel) and leaves the rest. The figure is a weighted median of the unchanged ops'
per-call ratios, each op weighing its time per step but none more than `MAX_WEIGHT` of the compared op time, so one
or two ops that a change made slower (even the largest) do not move it; its interval is the distribution-free one of
a weighted median (the weighted quantiles 1/2 -+ z / (2 sqrt(n_eff)), n_eff = (sum w)^2 / sum w^2).
The gate compares CPU ranks' steps at equal op speed with it (compare.py); what it cannot tell apart: a change that
slows every op alike (a library built without vector instructions, other thread settings) reads as machine speed. On
GPU ranks (the kernels' figure) it is reported, not taken out: a GPU pod has its device to itself, and a kernel
slower per call is what GPU regressions look like (a library's kernels, a larger shard, another dtype).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from stepscope_analyzer.analyses.phase_names import COMM, STEP
from stepscope_analyzer.diagnosis.stats import weighted_quantile
from stepscope_analyzer.diff.name_deltas import NameTimes

KINDS = frozenset({"cpu_op"})
"""the per-call work compared on CPU ranks (communication, memory copies and annotations are left out)"""
GPU_KINDS = frozenset({"kernel"})
"""where the baseline lists GPU kernels: a GPU step follows its device's speed, and the host ops' inclusive times
there hold waits for the device"""
SAME_CALLS = 0.01
"""calls per step may differ by this share and still count as unchanged"""
MIN_OPS = 5
MIN_SHARE = 0.2
"""the unchanged ops must hold at least this share of the baseline's compared op time per step"""
MAX_WEIGHT = 0.10
"""no op weighs more than this share of the baseline's compared op time: a regression in one big op is not speed"""


@dataclass(frozen=True)
class OpSpeed:
    log_ratio: float
    """candidate per-call time over baseline's, log (weighted median over the ops)"""
    log_low: float
    log_high: float
    """the interval of log_ratio at the confidence asked for"""
    ops: int
    share: float
    """share of the baseline's compared op time per step that the unchanged ops hold"""
    kernels: bool = False
    """measured on GPU kernels (the baseline lists them), not on CPU ops"""

    @property
    def pct(self) -> float:
        return 100.0 * math.expm1(self.log_ratio)

    @property
    def low_pct(self) -> float:
        return 100.0 * math.expm1(self.log_low)

    @property
    def high_pct(self) -> float:
        return 100.0 * math.expm1(self.log_high)


def unchanged_op_speed(baseline: NameTimes, candidate: NameTimes, confidence: float = 0.90) -> OpSpeed | None:
    """The per-call change of the unchanged ops, or None when too few ops are unchanged to say."""
    rows: list[tuple[float, float]] = []
    total = 0.0
    on_gpu = any(kind in GPU_KINDS for kind, _ in baseline.us)
    kinds = GPU_KINDS if on_gpu else KINDS
    for key in baseline.us:
        kind, name = key
        if kind not in kinds or COMM.search(name) or STEP.search(name):  # collectives and step spans are not work
            continue
        b_us, b_calls = baseline.per_step(key)
        total += b_us
        if key not in candidate.us:
            continue
        c_us, c_calls = candidate.per_step(key)
        if b_us <= 0 or c_us <= 0 or b_calls <= 0 or abs(c_calls - b_calls) > SAME_CALLS * b_calls:
            continue
        rows.append((math.log((c_us / c_calls) / (b_us / b_calls)), b_us))
    held = sum(w for _, w in rows)
    if len(rows) < MIN_OPS or total <= 0 or held < MIN_SHARE * total:
        return None
    rows = sorted((value, min(w, MAX_WEIGHT * total)) for value, w in rows)
    weight = sum(w for _, w in rows)
    n_eff = weight * weight / sum(w * w for _, w in rows)
    half = NormalDist().inv_cdf((1.0 + confidence) / 2.0) / (2.0 * math.sqrt(n_eff))
    return OpSpeed(
        log_ratio=weighted_quantile(rows, 0.5),
        log_low=weighted_quantile(rows, max(0.0, 0.5 - half)),
        log_high=weighted_quantile(rows, min(1.0, 0.5 + half)),
        ops=len(rows),
        share=held / total,
        kernels=on_gpu,
    )
