"""A throttled GPU is evidence for its slow rank: clocks against the other ranks (or the device's maximum) and the
slowdown reasons NVML reports; GPUs throttled alike are no one's evidence."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.detectors import gpu_throttle
from stepscope_analyzer.diagnosis.facts import Found, job_facts
from stepscope_analyzer.diagnosis.gpu_throttle import throttling, with_gpu_evidence
from stepscope_contract.report import (
    Cause,
    Diagnosis,
    Evidence,
    GpuMetrics,
    MetricStats,
    RankReport,
    SlowRank,
    ThrottleShare,
)

pytestmark = pytest.mark.unit


def _stats(value: float) -> MetricStats:
    return MetricStats(mean=value, min=value, max=value)


def _gpu(
    clock: float, temp: float = 60.0, reasons: dict[str, float] | None = None, max_clock: float = 1980
) -> GpuMetrics:
    labels = {"hw_thermal_slowdown": "thermal slowdown (hardware)", "sw_power_cap": "power cap (software)",
              "gpu_idle": "GPU idle"}  # fmt: skip
    throttle = [
        ThrottleShare(reason=k, label=labels[k], slowdown=k != "gpu_idle", share=v) for k, v in (reasons or {}).items()
    ]
    return GpuMetrics(gpu=0, samples=50, sm_clock_mhz=_stats(clock), sm_clock_max_mhz=max_clock,
                      temperature_c=_stats(temp), throttle=throttle)  # fmt: skip


def _ranks(slow_gpu: GpuMetrics, others: GpuMetrics, n: int = 8, slow: int = 5) -> list[RankReport]:
    return [RankReport(rank=r, gpu_metrics=slow_gpu if r == slow else others) for r in range(n)]


def test_a_thermally_throttled_gpu_is_named_with_its_clocks() -> None:
    ranks = _ranks(_gpu(1100, 88, {"hw_thermal_slowdown": 0.9}), _gpu(1980, 62))
    t = throttling(ranks[5], [r for r in ranks if r.rank != 5])
    assert t is not None
    assert t.detail() == (
        "SM clock 1,100 MHz vs 1,980 MHz on the other ranks; thermal slowdown active (90% of samples); 88 °C vs 62 °C"
    )


def test_low_clocks_alone_are_enough() -> None:
    ranks = _ranks(_gpu(1500), _gpu(1980))
    t = throttling(ranks[5], ranks[:5])
    assert t is not None and t.reasons == () and t.detail().startswith("SM clock 1,500 MHz vs 1,980 MHz")


def test_gpus_alike_are_not_throttled() -> None:
    capped = _gpu(1700, reasons={"sw_power_cap": 0.8})
    ranks = _ranks(capped, capped)
    assert all(throttling(r, [o for o in ranks if o is not r]) is None for r in ranks)
    near = _ranks(_gpu(1900), _gpu(1980))  # within 15%: noise, boost bins
    assert throttling(near[5], near[:5]) is None
    idle = _ranks(_gpu(1980, reasons={"gpu_idle": 0.9}), _gpu(1980))
    assert throttling(idle[5], idle[:5]) is None  # idle is not a slowdown
    assert throttling(RankReport(rank=0), near[:5]) is None  # no samples: no evidence


def test_a_lone_gpu_is_compared_with_its_maximum() -> None:
    lone = RankReport(rank=0, gpu_metrics=_gpu(1100, max_clock=1980))
    t = throttling(lone, [RankReport(rank=1)])
    assert t is not None and t.detail() == "SM clock 1,100 MHz vs 1,980 MHz (the device's maximum)"


def test_the_slow_ranks_evidence_leads_with_the_gpu() -> None:
    ranks = _ranks(_gpu(1100, 88, {"hw_thermal_slowdown": 0.9}), _gpu(1980, 62))
    compute = Evidence(metric="compute_time", value=2.0, baseline=1.0)
    d = Diagnosis(
        verdict="v",
        slow_ranks=[SlowRank(rank=5, cause=Cause.COMPUTE, confidence=0.8, node="gpu-node-1", evidence=[compute])],
        next_steps=["compare kernels"],
    )
    out = with_gpu_evidence(d, ranks)
    first = out.slow_ranks[0].evidence[0]
    assert (first.metric, first.value, first.baseline, first.unit) == ("gpu_sm_clock", 1100, 1980, "MHz")
    assert "thermal slowdown active" in first.detail and out.slow_ranks[0].evidence[1] == compute
    assert out.next_steps == ["compare kernels"]  # the gpu_throttle finding's remedy is the next step
    assert out.slow_ranks[0].cause is Cause.COMPUTE


def test_a_throttled_compute_straggler_is_a_gpu_throttle_finding_through_the_seam() -> None:
    """The cause added through the detector table: one enum member, its words, one detector, one row. A rank slow
    in its compute whose GPU runs throttled is named a gpu_throttle finding, its remedy the throttling's; a rank slow
    for its host time, or one whose GPU runs like the others', is not."""
    ranks = _ranks(_gpu(1100, 88, {"hw_thermal_slowdown": 0.9}), _gpu(1980, 62))
    slow = SlowRank(rank=5, cause=Cause.COMPUTE, confidence=0.8, node="gpu-node-1", excess_us=4200.0)
    facts = job_facts(ranks)
    (finding,) = gpu_throttle.detect(facts.seeing(Found(slow_ranks=(slow,))), DiagnosisConfig()).findings
    assert (finding.cause, finding.ranks, finding.gain_us) == (Cause.GPU_THROTTLE, [5], 4200.0)
    assert finding.remedy.startswith("Rank 5's GPU is throttled (SM clock 1,100 MHz vs 1,980 MHz")
    assert "node gpu-node-1" in finding.remedy and finding.evidence[0].metric == "gpu_sm_clock"
    host = slow.model_copy(update={"cause": Cause.HOST})
    assert not gpu_throttle.detect(facts.seeing(Found(slow_ranks=(host,))), DiagnosisConfig()).findings
    even = job_facts(_ranks(_gpu(1980), _gpu(1980)))
    assert not gpu_throttle.detect(even.seeing(Found(slow_ranks=(slow,))), DiagnosisConfig()).findings


def test_nothing_changes_without_throttling_or_for_a_hang() -> None:
    even = _ranks(_gpu(1980), _gpu(1980))
    d = Diagnosis(verdict="v", slow_ranks=[SlowRank(rank=5, cause=Cause.COMPUTE, confidence=0.8)])
    assert with_gpu_evidence(d, even) == d
    hot = _ranks(_gpu(1100, reasons={"hw_thermal_slowdown": 1.0}), _gpu(1980))
    hang = Diagnosis(verdict="v", slow_ranks=[SlowRank(rank=5, cause=Cause.HANG, confidence=0.9)])
    assert with_gpu_evidence(hang, hot) == hang
