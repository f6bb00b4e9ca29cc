"""Which ranks slow the job, and why. Pure.

Steps are synchronised by collectives, so a slow rank does not show a longer step: the others wait for it
inside their collectives. A rank is slow when one of its own costs per step (busy time, host-side gaps,
memory-op time, or time inside collectives not spent waiting) is an outlier against the median of all ranks
(robust z-score over median/MAD) and large enough to matter (>= min_slowdown_percent of a step). Waiting
less than the others inside collectives corroborates it (they wait for this rank); a rank that waits less
with no own cost standing out is still late: its cause is reported as host with a lower confidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.evidence import name_evidence, name_times
from stepscope_analyzer.diagnosis.metrics import RankMetrics, all_metrics, per_step_divisor, wait_is_measured
from stepscope_analyzer.diagnosis.stats import MAD_TO_SIGMA, median
from stepscope_contract.report import Cause, Evidence, RankReport, SlowRank

_OWN_COSTS: dict[str, Cause] = {
    "compute": Cause.COMPUTE,
    "host": Cause.HOST,
    "memory": Cause.MEMORY,
    "communication": Cause.COMMUNICATION,
}
_METRIC_LABEL = {
    "compute": "compute_time",
    "host": "idle_time (host-side stalls)",
    "memory": "memory_time",
    "communication": "communication_time (own, without waiting)",
    "wait": "collective_wait_time",
}
_ESTIMATED = {
    "communication": "communication_time (estimated own time: least over ranks)",
    "wait": "collective_wait_time (estimated: time in collectives beyond the least over ranks)",
}


@dataclass(frozen=True)
class _Center:
    median: float
    scale: float


@dataclass(frozen=True)
class _Flag:
    metric: str
    excess: float
    z: float


def _centers(metrics: list[RankMetrics], step_med: float, cfg: DiagnosisConfig) -> dict[str, list[_Center]]:
    """Per metric and rank: median and robust scale of the OTHER ranks (an outlier must not widen its own
    yardstick, and with two ranks the other one is the only reference)."""
    out: dict[str, list[_Center]] = {}
    for name in ("compute", "host", "memory", "communication", "wait"):
        arr = np.asarray([m.values[name] for m in metrics], dtype=np.float64)
        centers: list[_Center] = []
        for i in range(arr.size):
            others = np.delete(arr, i)
            med = float(np.median(others))
            spread = float(np.median(np.abs(others - med)))
            floor = max(cfg.relative_scale_floor * abs(med), cfg.step_scale_floor * step_med)
            centers.append(_Center(med, max(MAD_TO_SIGMA * spread, floor, 1e-9)))
        out[name] = centers
    return out


def _sample_factor(n: int) -> float:
    """Fewer ranks make the median/MAD comparison weaker."""
    return {1: 0.0, 2: 0.7, 3: 0.85}.get(n, 1.0)


def _confidence(flag: _Flag, excess_pct: float, waited_for: float | None, n: int, cfg: DiagnosisConfig) -> float:
    thr = cfg.outlier_threshold
    strength = min(1.0, max(0.0, (flag.z - thr) / thr))
    size = min(1.0, excess_pct / max(4.0 * cfg.min_slowdown_percent, 1.0))
    corroboration = 0.5 if waited_for is None else waited_for
    value = (0.35 + 0.25 * strength + 0.2 * size + 0.2 * corroboration) * _sample_factor(n)
    return round(min(0.99, max(0.05, value)), 2)


def find_slow_ranks(ranks: list[RankReport], cfg: DiagnosisConfig) -> list[SlowRank]:
    """Slow ranks among the analysed ones, slowest first; empty for a balanced job."""
    if len(ranks) < 2:
        return []
    metrics = all_metrics(ranks)
    divisors = per_step_divisor(ranks)
    step_med = median([m.step_us for m in metrics])
    if step_med <= 0:
        step_med = max(median([sum(m.values.values()) for m in metrics]), 1e-9)
    centers = _centers(metrics, step_med, cfg)
    min_excess = cfg.min_slowdown_percent / 100.0 * step_med
    wait_known = any(m.values["wait"] > 0 for m in metrics)
    labels = _METRIC_LABEL if wait_is_measured(ranks) else {**_METRIC_LABEL, **_ESTIMATED}

    flagged: dict[int, list[_Flag]] = {}
    late: dict[int, _Flag] = {}
    for i, m in enumerate(metrics):
        for name in _OWN_COSTS:
            c = centers[name][i]
            excess = m.values[name] - c.median
            z = excess / c.scale
            if z >= cfg.outlier_threshold and excess >= min_excess:
                flagged.setdefault(m.rank, []).append(_Flag(name, excess, z))
        if wait_known:
            c = centers["wait"][i]
            deficit = c.median - m.values["wait"]
            z = deficit / c.scale
            if z >= cfg.outlier_threshold and deficit >= min_excess:
                late[m.rank] = _Flag("wait", deficit, z)

    # Others' time inside collectives grows while they wait for a slow rank; without a separate wait
    # measure, that looks like slow communication on every other rank. A rank with an own cost other than
    # communication explains it, so communication flags on the other ranks are dropped then.
    non_comm = {r for r, fs in flagged.items() if any(f.metric != "communication" for f in fs)}
    if non_comm:
        for r in list(flagged):
            if r not in non_comm:
                del flagged[r]

    by_rank = {m.rank: m for m in metrics}
    report_by_rank = {r.rank: r for r in ranks}
    tables: dict[Cause, dict[int, dict[tuple[str, str], float]]] = {}
    result: list[SlowRank] = []
    index = {m.rank: i for i, m in enumerate(metrics)}
    # A rank that only arrives last, with no own cost standing out, is reported only when the gap is twice the
    # reporting floor: with an estimated wait, the last arrival of a balanced job is just scheduling noise.
    late = {r: f for r, f in late.items() if r in flagged or wait_is_measured(ranks) or f.excess >= 2 * min_excess}
    for rank in sorted(set(flagged) | set(late)):
        m = by_rank[rank]
        wait_center = centers["wait"][index[rank]]
        flags = sorted(flagged.get(rank, []), key=lambda f: -f.excess)
        late_flag = late.get(rank)
        waited_for: float | None = None
        if wait_known:
            waited_for = 1.0 if late_flag is not None else (0.5 if m.values["wait"] <= wait_center.median else 0.0)
        primary = flags[0] if flags else late_flag
        assert primary is not None
        cause = _OWN_COSTS.get(primary.metric, Cause.HOST)
        # steps are synchronised: without this rank's excess, a step would take step_med - excess
        base_step = max(step_med - primary.excess, 0.1 * step_med)
        slowdown_pct = 100.0 * primary.excess / base_step
        confidence = _confidence(primary, 100.0 * primary.excess / step_med, waited_for, len(ranks), cfg)
        if not flags:
            confidence = round(confidence * 0.7, 2)  # late, but nothing it does stands out

        evidence: list[Evidence] = []
        for f in flags:
            evidence.append(
                Evidence(
                    metric=labels[f.metric],
                    value=m.values[f.metric],
                    baseline=centers[f.metric][index[rank]].median,
                    detail=f"per step; +{100.0 * f.excess / step_med:.1f}% of the median step, robust z {f.z:.1f}",
                )
            )
        if wait_known:
            others_wait = wait_center.median
            detail = (
                "the other ranks wait for this one inside collectives"
                if late_flag is not None
                else "per step, time waiting inside collectives"
            )
            evidence.append(
                Evidence(metric=labels["wait"], value=m.values["wait"], baseline=others_wait, detail=detail)
            )
        if cause not in tables:
            tables[cause] = {r.rank: name_times(r, cause, divisors[r.rank]) for r in ranks}
        evidence.extend(name_evidence(rank, cause, tables[cause], step_med, cfg.max_evidence))
        result.append(
            SlowRank(
                rank=rank,
                cause=cause,
                confidence=confidence,
                slowdown_pct=round(slowdown_pct, 1),
                node=report_by_rank[rank].node,
                evidence=evidence,
            )
        )
    result.sort(key=lambda s: (-s.slowdown_pct, s.rank))
    return result
