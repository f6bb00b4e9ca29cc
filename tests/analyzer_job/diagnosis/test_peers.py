"""Peers: in a pipeline job a rank is compared only with the ranks of its stage in the other replicas. A slow
worker is named; the fast replicas' last-stage ranks, which idle outside any collective while the slow replica
finishes, are waiting, not host work; a heavy stage's ranks are not stragglers; a data-parallel job is compared as
before."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.job_view import latenesses
from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.peers import replica_lateness, waiting_not_work
from stepscope_analyzer.diagnosis.rank_costs import with_collective_waits
from stepscope_analyzer.diagnosis.slow_ranks import find_slow_ranks
from stepscope_contract.report import Cause, ParallelLayout
from stepscope_testing.pipeline_summaries import PipeShape, pipeline_job
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit

SLOW_LAST_STAGE = PipeShape(pp=4, dp=4, rank_scale={13: 1.5}, wait_as_host=True)
"""16 workers, pp4 x dp4; rank 13 (stage 3, replica 1) computes 1.5x; the other replicas' last-stage ranks wait
for it outside any collective"""


def test_the_slow_worker_alone_is_named_among_its_peers() -> None:
    ranks = pipeline_job(SLOW_LAST_STAGE)
    every_rank = find_slow_ranks(with_collective_waits(ranks), DiagnosisConfig())
    assert {(s.rank, s.cause) for s in every_rank} >= {(12, Cause.HOST), (14, Cause.HOST)}  # against every rank
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(13, Cause.COMPUTE)]
    peers = next(e for e in d.slow_ranks[0].evidence if e.metric == "peers")
    assert "pipeline stage 3" in peers.detail and "rank 12, 14, 15" in peers.detail
    assert "each rank compared with its peers" in d.verdict and "16 ranks = 4 stages x 4 replicas" in d.verdict


def test_waiting_outside_collectives_is_moved_to_waiting() -> None:
    ranks = [r for r in pipeline_job(SLOW_LAST_STAGE) if r.rank in (12, 13, 14, 15)]
    moved = {r.rank: r for r in waiting_not_work(ranks)}
    before = {r.rank: r for r in ranks}
    for rank in (12, 14, 15):
        for old, new in zip(before[rank].step_phases, moved[rank].step_phases, strict=True):
            assert old.other > 10_000.0 and 1_000.0 <= new.other < 1_100.0  # the host work itself stays
            assert new.communication_wait == pytest.approx(old.communication_wait + old.other - new.other)
    assert moved[13].step_phases == before[13].step_phases  # the slow rank waits for nobody


def test_a_host_straggler_keeps_its_host_work() -> None:
    shape = PipeShape(pp=2, dp=4, steps=6)
    ranks = pipeline_job(shape)
    stalled = [p.model_copy(update={"other": p.other + 20_000.0}) for p in ranks[5].step_phases]
    ranks[5] = ranks[5].model_copy(update={"step_phases": stalled})
    kept = [p.other for p in waiting_not_work(ranks[4:])[1].step_phases]
    assert kept == pytest.approx([p.other for p in stalled], rel=0.1)  # at most its peers' compute noise moves


def test_a_heavy_stage_has_no_stragglers() -> None:
    ranks = pipeline_job(PipeShape(pp=4, dp=2, stage_scale={3: 1.65}))
    assert {s.rank for s in find_slow_ranks(with_collective_waits(ranks), DiagnosisConfig())} == {6, 7}
    assert diagnose(ranks).slow_ranks == []


def test_a_data_parallel_job_is_compared_as_before() -> None:
    ranks = synthetic_job(JobShape(world_size=8), slow_rank=3, cause=Cause.COMPUTE, extra_us=20_000.0, seed=3)
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(3, Cause.COMPUTE)]
    assert d.layout is None and d.findings == []


def test_the_verdict_keeps_the_slow_node() -> None:
    ranks = [r.model_copy(update={"node": f"node-{r.rank // 2}"}) for r in pipeline_job(SLOW_LAST_STAGE)]
    d = diagnose(ranks)
    assert d.verdict.startswith("Rank 13 on node node-6 slows the job")


def test_the_other_replicas_wait_for_a_rank_through_its_whole_replica() -> None:
    """A slow stage-0 worker delays its replica's stage 1 through the schedule: the other replicas may wait for the
    replica at either stage's join. Each rank's replica lateness is the most any rank of its replica keeps its
    own peers waiting, the same for every rank of a replica, and never below the rank's own."""
    layout_job = pipeline_job(PipeShape(pp=2, dp=2, rank_scale={1: 1.6}, device="cpu"))
    d = diagnose(layout_job)
    assert d.layout is not None
    stage = {x.rank: x.stage for x in d.layout.ranks}
    replica = {x.rank: x.replica for x in d.layout.ranks}
    by_rank = {r.rank: r for r in with_collective_waits(layout_job)}
    cohorts = [waiting_not_work([by_rank[r] for r in sorted(by_rank) if stage[r] == s]) for s in (0, 1)]
    own: dict[int, float] = {}
    for cohort in cohorts:
        own.update(latenesses(cohort))
    late = replica_lateness(cohorts, _layout(d.layout))
    for r, value in late.items():
        mates = [x for x in late if replica[x] == replica[r]]
        assert value == max(own[x] for x in mates) >= own[r]
    assert late[1] > 0 and late[1] == late[next(x for x in late if x != 1 and replica[x] == replica[1])]


def _layout(shape: ParallelLayout) -> Layout:
    stage = {x.rank: x.stage for x in shape.ranks}
    replica = {x.rank: x.replica for x in shape.ranks}
    return Layout(shape.stages, shape.replicas, 1, stage, replica, {r: 0 for r in stage}, "test")
