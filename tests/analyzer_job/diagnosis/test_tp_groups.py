"""A rank that computes more than its peers inside a tensor-parallel group is also named as its group's
straggler: the group, the remedy, its excess as the gain. Without TP groups nothing changes."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_contract.report import Cause, ProcessGroup, RankReport
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


def _with_groups(ranks: list[RankReport]) -> list[RankReport]:
    """dp4 x tp2 as Megatron names it: TP groups of consecutive ranks, data-parallel groups strided."""
    out = []
    for r in ranks:
        tp = ProcessGroup(name=f"tp{r.rank // 2}", desc="TENSOR_MODEL_PARALLEL_GROUP",
                          ranks=[r.rank // 2 * 2, r.rank // 2 * 2 + 1])  # fmt: skip
        dp = ProcessGroup(name=f"dp{r.rank % 2}", desc="DATA_PARALLEL_GROUP", ranks=list(range(r.rank % 2, 8, 2)))
        out.append(r.model_copy(update={"process_groups": [ProcessGroup(name="0", desc="default_pg"), tp, dp]}))
    return out


def test_a_slow_rank_of_a_tp_group_is_its_groups_straggler() -> None:
    ranks = _with_groups(synthetic_job(JobShape(world_size=8), slow_rank=3, cause=Cause.COMPUTE, extra_us=20_000.0))
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(3, Cause.COMPUTE)]
    assert d.layout is not None and (d.layout.replicas, d.layout.tp) == (4, 2)
    assert [f.cause for f in d.findings] == [Cause.TP_STRAGGLER]
    f = d.findings[0]
    assert f.ranks == [2, 3] and f.gain_us == d.slow_ranks[0].excess_us
    assert "rank 3 holds its tensor-parallel group (rank 2-3) back" in f.summary
    assert f.remedy.startswith("Rank 3 holds its whole tensor-parallel group back")
    assert "8 ranks = 4 replicas x 2 TP ranks, from process groups" in d.verdict


def test_a_healthy_tp_job_has_no_findings() -> None:
    d = diagnose(_with_groups(synthetic_job(JobShape(world_size=8), seed=4)))
    assert d.slow_ranks == [] and d.findings == []
