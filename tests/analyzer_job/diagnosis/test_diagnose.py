"""Diagnosis on synthetic jobs: planted slow ranks are named with their cause; a balanced job has none."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis import DiagnosisConfig, diagnose
from stepscope_analyzer.diagnosis.synthetic import JobShape, synthetic_job
from stepscope_contract.report import Cause, RankStatus
from stepscope_contract.session import AnalysisSpec

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("measured_wait", [True, False])
def test_balanced_job_with_noise_has_no_slow_rank(seed: int, measured_wait: bool) -> None:
    ranks = synthetic_job(JobShape(world_size=16), noise=0.03, seed=seed, measured_wait=measured_wait)
    d = diagnose(ranks)
    assert d.slow_ranks == []
    assert d.slow_nodes == []
    assert d.verdict.startswith("No slow rank")


@pytest.mark.parametrize("cause", [Cause.COMPUTE, Cause.HOST, Cause.MEMORY, Cause.COMMUNICATION])
@pytest.mark.parametrize("seed", range(3))
def test_planted_slow_rank_is_named_with_its_cause(cause: Cause, seed: int) -> None:
    ranks = synthetic_job(JobShape(world_size=8), slow_rank=5, cause=cause, extra_us=12_000, seed=seed)
    d = diagnose(ranks)
    assert [s.rank for s in d.slow_ranks] == [5]
    slow = d.slow_ranks[0]
    assert slow.cause is cause
    assert 0.8 <= slow.confidence <= 1.0
    assert slow.node == "node-1"
    assert 10.0 < slow.slowdown_pct < 25.0  # 12 ms on top of ~78 ms steps
    assert slow.evidence, "a slow rank comes with evidence"
    assert d.verdict.startswith("Rank 5 on node node-1 slows the job")
    assert cause.value in d.verdict
    assert d.next_steps


@pytest.mark.parametrize("measured_wait", [True, False])
def test_compute_evidence_names_the_kernel_that_differs(measured_wait: bool) -> None:
    ranks = synthetic_job(slow_rank=2, cause=Cause.COMPUTE, extra_us=20_000, measured_wait=measured_wait)
    slow = diagnose(ranks).slow_ranks[0]
    names = [e.metric for e in slow.evidence]
    assert names[0] == "compute_time"
    assert "attention_fwd_kernel_slowpath" in names
    kernel = next(e for e in slow.evidence if e.metric == "attention_fwd_kernel_slowpath")
    assert kernel.value == pytest.approx(20_000, rel=1e-6)  # per step
    assert kernel.baseline == 0.0
    wait = next(e for e in slow.evidence if e.metric.startswith("collective_wait_time"))
    assert wait.value < wait.baseline  # the others wait for it
    assert ("estimated" in wait.metric) is (not measured_wait)


def test_host_evidence_names_the_data_loader() -> None:
    ranks = synthetic_job(slow_rank=0, cause=Cause.HOST, extra_us=30_000)
    slow = diagnose(ranks).slow_ranks[0]
    assert slow.cause is Cause.HOST
    assert any("dataloader.py" in e.metric for e in slow.evidence)


def test_small_difference_below_min_slowdown_is_not_reported() -> None:
    ranks = synthetic_job(slow_rank=3, cause=Cause.COMPUTE, extra_us=3_500, noise=0.0)  # ~4.5% of a step
    assert diagnose(ranks).slow_ranks == []
    strict = DiagnosisConfig.from_spec(AnalysisSpec(min_slowdown_percent=1.0))
    assert [s.rank for s in diagnose(ranks, config=strict).slow_ranks] == [3]


def test_two_ranks_compare_against_each_other_with_lower_confidence() -> None:
    ranks = synthetic_job(JobShape(world_size=2), slow_rank=1, cause=Cause.HOST, extra_us=40_000)
    slow = diagnose(ranks).slow_ranks
    assert [(s.rank, s.cause) for s in slow] == [(1, Cause.HOST)]
    assert slow[0].confidence < 0.8


def test_slow_node_groups_its_slow_ranks() -> None:
    ranks = synthetic_job(JobShape(world_size=16, ranks_per_node=4), noise=0.01)
    for r in ranks[4:8]:  # every rank of node-1 computes 25 ms more per step
        r.compute_time += 25_000 * r.steps.count
    d = diagnose(ranks)
    assert sorted(s.rank for s in d.slow_ranks) == [4, 5, 6, 7]
    assert [(n.node, n.ranks, n.cause) for n in d.slow_nodes] == [("node-1", [4, 5, 6, 7], Cause.COMPUTE)]
    assert "node node-1" in d.verdict


def test_errored_ranks_do_not_stop_the_diagnosis() -> None:
    ranks = synthetic_job(slow_rank=1, cause=Cause.COMPUTE, extra_us=20_000)
    ranks[6] = ranks[6].model_copy(update={"status": RankStatus.ERROR, "error": "truncated gzip"})
    d = diagnose(ranks)
    assert [s.rank for s in d.slow_ranks] == [1]
    assert any("could not be analysed" in s for s in d.next_steps)


def test_single_rank_has_nothing_to_compare() -> None:
    d = diagnose(synthetic_job(JobShape(world_size=1)))
    assert d.slow_ranks == [] and d.verdict.startswith("One rank analysed")


def test_no_analysable_rank() -> None:
    d = diagnose([])
    assert d.slow_ranks == [] and d.verdict.startswith("No rank could be analysed")


def test_bottlenecks_and_communication_are_aggregated() -> None:
    d = diagnose(synthetic_job(JobShape(world_size=4)))
    assert d.bottlenecks[0].name == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    assert d.bottlenecks[0].ranks == [0, 1, 2, 3]
    ratios = [b.bottleneck_ratio for b in d.bottlenecks]
    assert ratios == sorted(ratios, reverse=True)
    assert [(c.name, c.process_group, c.count) for c in d.communication] == [("allreduce", "0:default_pg", 10)]
