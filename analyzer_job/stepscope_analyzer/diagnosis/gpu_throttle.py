"""A throttled GPU as evidence: a slow rank whose GPU ran below the others' clocks, or held down by heat or power,
has the reason its kernels take longer. Pure.

A GPU is throttled when its mean SM clock is below CLOCK_DROP of the other ranks' median (of the device's
maximum when no other rank has samples), or when a slowdown reason (thermal, power cap, power brake, hardware
slowdown) was set in at least SLOWDOWN_SHARE more of its samples than on the other ranks' median. A job whose
GPUs are all power-capped alike has no throttled rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.report import Diagnosis, Evidence, GpuMetrics, RankReport, ThrottleShare

CLOCK_DROP = 0.85
SLOWDOWN_SHARE = 0.2


@dataclass(frozen=True)
class Throttling:
    rank: int
    clock_mhz: float | None
    baseline_mhz: float | None
    baseline_from: str
    """'on the other ranks' or 'the device's maximum'"""
    reasons: tuple[ThrottleShare, ...]
    temperature_c: float | None = None
    baseline_temperature_c: float | None = None

    def detail(self) -> str:
        """e.g. 'SM clock 1,100 MHz vs 1,980 MHz on the other ranks; thermal slowdown active (90% of samples)'."""
        parts: list[str] = []
        if self.clock_mhz is not None and self.baseline_mhz is not None:
            parts.append(f"SM clock {self.clock_mhz:,.0f} MHz vs {self.baseline_mhz:,.0f} MHz {self.baseline_from}")
        shares: dict[str, float] = {}
        for r in self.reasons:  # 'thermal slowdown (hardware)' and '(software)' read as one 'thermal slowdown'
            family = r.label.split(" (")[0]
            shares[family] = max(shares.get(family, 0.0), r.share)
        parts.extend(f"{family} active ({share:.0%} of samples)" for family, share in shares.items())
        if self.temperature_c is not None and self.baseline_temperature_c is not None:
            parts.append(f"{self.temperature_c:.0f} °C vs {self.baseline_temperature_c:.0f} °C")
        return "; ".join(parts)


def _clock(m: GpuMetrics | None) -> float | None:
    return m.sm_clock_mhz.mean if m is not None and m.sm_clock_mhz is not None else None


def _temperature(m: GpuMetrics | None) -> float | None:
    return m.temperature_c.mean if m is not None and m.temperature_c is not None else None


def _share(m: GpuMetrics | None, reason: str) -> float:
    if m is None:
        return 0.0
    return next((t.share for t in m.throttle if t.reason == reason), 0.0)


def throttling(rank: RankReport, others: list[RankReport]) -> Throttling | None:
    """How `rank`'s GPU is throttled compared with `others`, or None when it is not (or has no samples)."""
    mine = rank.gpu_metrics
    if mine is None or mine.samples == 0:
        return None
    sampled = [o.gpu_metrics for o in others if o.gpu_metrics is not None and o.gpu_metrics.samples > 0]
    clock = _clock(mine)
    other_clocks = [c for c in map(_clock, sampled) if c is not None]
    baseline, baseline_from = (median(other_clocks), "on the other ranks") if other_clocks else (None, "")
    if baseline is None and mine.sm_clock_max_mhz:
        baseline, baseline_from = mine.sm_clock_max_mhz, "(the device's maximum)"
    clock_low = clock is not None and baseline is not None and clock < CLOCK_DROP * baseline
    reasons = tuple(
        t
        for t in mine.throttle
        if t.slowdown and t.share - median([_share(o, t.reason) for o in sampled] or [0.0]) >= SLOWDOWN_SHARE
    )
    if not clock_low and not reasons:
        return None
    other_temps = [t for t in map(_temperature, sampled) if t is not None]
    return Throttling(
        rank=rank.rank,
        clock_mhz=clock,
        baseline_mhz=baseline,
        baseline_from=baseline_from,
        reasons=reasons,
        temperature_c=_temperature(mine),
        baseline_temperature_c=median(other_temps) if other_temps else None,
    )


def throttle_evidence(t: Throttling) -> Evidence:
    return Evidence(
        metric="gpu_sm_clock",
        value=t.clock_mhz or 0.0,
        baseline=t.baseline_mhz or 0.0,
        unit="MHz",
        detail=t.detail(),
    )


def with_gpu_evidence(diagnosis: Diagnosis, ranks: list[RankReport]) -> Diagnosis:
    """The diagnosis with throttling evidence first on each slow rank whose GPU was throttled (the gpu_throttle
    finding, diagnosis.detectors.gpu_throttle, carries the next step)."""
    by_rank = {r.rank: r for r in ranks}
    slow = []
    changed = False
    for s in diagnosis.slow_ranks:
        rank = by_rank.get(s.rank)
        found = None if rank is None or s.cause in STANDSTILL else throttling(rank, [r for r in ranks if r is not rank])
        if found is None:
            slow.append(s)
            continue
        slow.append(s.model_copy(update={"evidence": [throttle_evidence(found), *s.evidence]}))
        changed = True
    return diagnosis.model_copy(update={"slow_ranks": slow}) if changed else diagnosis
