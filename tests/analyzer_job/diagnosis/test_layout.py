"""The job's parallel layout from its traces: process groups named as torchtitan, Megatron and DeepSpeed name them,
unnamed groups told apart by their shape and by who exchanges point-to-point messages, and, without pg_config
members, from who meets whom in collectives. A data-parallel job has no layout."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis.diagnose import dumped_groups
from stepscope_analyzer.diagnosis.layout import dimension_of, job_layout, layout_model
from stepscope_analyzer.flight_recorder.dump import Dump, PgConfig
from stepscope_contract.report import Collective, ProcessGroup, RankReport
from stepscope_testing.pipeline_summaries import PipeShape, pipeline_job

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("desc", "dim"),
    [
        ("mesh_pp", "pp"),
        ("mesh_dp_shard", "dp"),
        ("mesh_tp", "tp"),
        ("PIPELINE_MODEL_PARALLEL_GROUP", "pp"),
        ("DATA_PARALLEL_GROUP", "dp"),
        ("TENSOR_MODEL_PARALLEL_GROUP", "tp"),
        ("CONTEXT_PARALLEL_GROUP", "cp"),
        ("EXPERT_MODEL_PARALLEL_GROUP", "ep"),
        ("TENSOR_AND_DATA_PARALLEL_GROUP", None),
        ("mesh_dp_shard_cp", None),
        ("EMBEDDING_GROUP", None),
        ("undefined", None),
        ("default_pg", None),
    ],
)
def test_a_description_names_one_dimension_or_none(desc: str, dim: str | None) -> None:
    assert dimension_of(desc) == dim


def test_named_groups_give_stage_and_replica() -> None:
    ranks = pipeline_job(PipeShape(pp=4, dp=2, steps=2))
    layout = job_layout(ranks)
    assert layout is not None and (layout.stages, layout.replicas, layout.tp) == (4, 2, 1)
    assert [layout.stage[r] for r in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [layout.replica[r] for r in range(8)] == [0, 1] * 4
    assert layout.peers(list(range(8))) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    model = layout_model(layout, ranks)
    assert model.summary == "8 ranks = 4 stages x 2 replicas, from process groups"
    assert model.microbatches == 4
    assert [(x.rank, x.stage, x.replica) for x in model.ranks][:3] == [(0, 0, 0), (1, 0, 1), (2, 1, 0)]


def test_unnamed_groups_are_told_apart_by_shape_and_messages() -> None:
    """DeepSpeed's pipeline engine leaves its groups unnamed: the family with the largest stride is the pipeline
    when the ranks send and receive."""
    ranks = pipeline_job(PipeShape(pp=2, dp=4, steps=2, names=False))
    layout = job_layout(ranks)
    assert layout is not None and (layout.stages, layout.replicas) == (2, 4)
    assert [layout.stage[r] for r in range(8)] == [0] * 4 + [1] * 4
    assert "unnamed" in layout.source


def test_each_rank_lists_only_its_own_groups() -> None:
    """Only ranks 0 and 3 of a pp2 x dp2 job: rank 0's groups and rank 3's still place both."""
    ranks = [r for r in pipeline_job(PipeShape(pp=2, dp=2, steps=2)) if r.rank in (0, 3)]
    layout = job_layout(ranks)
    assert layout is not None and (layout.stage[0], layout.stage[3]) == (0, 1)
    assert (layout.replica[0], layout.replica[3]) == (0, 1)


def _meets(rank: int, labels: list[str]) -> RankReport:
    sends = [Collective(name="nccl:send", process_group=None, count=8)]
    return RankReport(rank=rank, world_size=4, collectives=sends + [Collective(name="nccl:all_reduce",
                      process_group=label, count=2) for label in labels])  # fmt: skip


def test_without_members_who_meets_whom_in_collectives_says_it() -> None:
    """No pg_config members: the ranks that share a collective's process group form it."""
    ranks = [
        _meets(0, ["0:default_pg", "3:mesh_dp"]),
        _meets(1, ["0:default_pg", "3:mesh_dp"]),
        _meets(2, ["0:default_pg", "4:mesh_dp", "1:mesh_pp"]),
        _meets(3, ["0:default_pg", "4:mesh_dp", "2:mesh_pp"]),
    ]
    ranks[0].collectives.append(Collective(name="nccl:send", process_group="1:mesh_pp", count=8))
    ranks[1].collectives.append(Collective(name="nccl:send", process_group="2:mesh_pp", count=8))
    layout = job_layout(ranks)
    assert layout is not None and layout.source == "collectives (who meets whom)"
    assert [layout.stage[r] for r in range(4)] == [0, 0, 1, 1]
    assert [layout.replica[r] for r in range(4)] == [0, 1, 0, 1]


def test_tensor_parallel_groups_are_a_dimension() -> None:
    groups = {
        r: [
            ProcessGroup(name="0", desc="default_pg"),
            ProcessGroup(name=f"tp{r // 2}", desc="mesh_tp", ranks=[r // 2 * 2, r // 2 * 2 + 1]),
            ProcessGroup(name=f"dp{r % 2}", desc="mesh_dp", ranks=[r % 2, r % 2 + 2]),
        ]
        for r in range(4)
    }
    ranks = [RankReport(rank=r, world_size=4, process_groups=groups[r]) for r in range(4)]
    layout = job_layout(ranks)
    assert layout is not None and (layout.stages, layout.replicas, layout.tp) == (1, 2, 2)
    assert [layout.tp_pos[r] for r in range(4)] == [0, 1, 0, 1]
    assert layout.peers(list(range(4))) == [[0, 1, 2, 3]]  # one stage: every rank does the same work


def test_a_data_parallel_job_has_no_layout() -> None:
    whole = [ProcessGroup(name="0", desc="default_pg")]
    assert job_layout([RankReport(rank=r, world_size=4, process_groups=whole) for r in range(4)]) is None
    assert job_layout([RankReport(rank=r, world_size=4) for r in range(4)]) is None


def test_the_flight_recorders_groups_stand_in_for_the_traces() -> None:
    """Traces without pg_config members (older Kineto): the groups of the Flight Recorder dumps place the ranks."""
    bare = [r.model_copy(update={"process_groups": []}) for r in pipeline_job(PipeShape(pp=2, dp=2, steps=2))]
    dumped = [
        ProcessGroup(name="1", desc="mesh_pp", ranks=[0, 2]),
        ProcessGroup(name="2", desc="mesh_pp", ranks=[1, 3]),
        ProcessGroup(name="3", desc="mesh_dp", ranks=[0, 1]),
        ProcessGroup(name="4", desc="mesh_dp", ranks=[2, 3]),
    ]
    layout = job_layout(bare, dumped)
    assert layout is not None and layout.source == "the Flight Recorder's process groups"
    assert [layout.stage[r] for r in range(4)] == [0, 0, 1, 1]


def test_the_dumps_groups_are_read_with_their_descriptions() -> None:
    dump = Dump(pg_config={"1": PgConfig(name="1", desc="mesh_pp", ranks="[0, 2]")})
    assert dumped_groups({0: dump}) == [ProcessGroup(name="1", desc="mesh_pp", ranks=[0, 2])]
    assert dumped_groups(None) == []
