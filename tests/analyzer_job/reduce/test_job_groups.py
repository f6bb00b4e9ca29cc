"""Telling traces of different jobs apart: world size, process groups, recording time; the largest group is the
job that is diagnosed, and ranks that say nothing of this go with it. Each rank of a pipeline job lists only the
groups it belongs to: ranks that list different smaller groups are one job as long as they agree on each group."""

from __future__ import annotations

import pytest

from stepscope_analyzer.reduce.job_groups import split_jobs
from stepscope_contract.report import ProcessGroup, RankReport

pytestmark = pytest.mark.unit
T0 = 1_790_000_000.0


def _rank(
    rank: int, world: int | None = 4, start: float | None = T0, fp: str | None = "gloo/4/0:default_pg[4]"
) -> RankReport:
    end = None if start is None else start + 2.0
    return RankReport(rank=rank, world_size=world, job_fingerprint=fp, captured_from_unix_s=start,
                      captured_to_unix_s=end)  # fmt: skip


def test_one_job_is_one_group() -> None:
    ranks = [_rank(r, start=T0 + 0.05 * r) for r in range(4)]  # clocks of different nodes differ a little
    assert split_jobs(ranks).foreign == {}


def test_another_world_size_is_another_job() -> None:
    ranks = [_rank(r) for r in range(4)] + [_rank(4, world=8, fp="gloo/8/0:default_pg[8]")]
    groups = split_jobs(ranks)
    assert groups.foreign == {4: "world size 8, not 4"}
    assert groups.note is not None and "rank 4 is not from the job of ranks 0-3, left out" in groups.note


def test_other_process_groups_are_another_job() -> None:
    ranks = [_rank(r) for r in range(3)] + [_rank(3, fp="gloo/4/0:default_pg[4],1:tp[4]")]
    assert "process groups" in split_jobs(ranks).foreign[3]


def _pp2_dp2(rank: int) -> RankReport:
    """pp2 x dp2 as torchtitan's mesh names it: rank = stage * 2 + replica."""
    stage, replica = divmod(rank, 2)
    pp = ProcessGroup(name=str(1 + replica), desc="mesh_pp", ranks=[replica, 2 + replica])
    dp = ProcessGroup(name=str(3 + stage), desc="mesh_dp", ranks=[2 * stage, 2 * stage + 1])
    whole = ProcessGroup(name="0", desc="default_pg")
    return _rank(rank).model_copy(update={"process_groups": [whole, pp, dp]})


def test_pipeline_ranks_that_list_their_own_groups_are_one_job() -> None:
    """Rank 0 lists pipeline group 1 and data group 3, rank 3 groups 2 and 4: one job all the same."""
    assert split_jobs([_pp2_dp2(r) for r in range(4)]).foreign == {}


def test_ranks_that_disagree_on_a_group_are_another_job() -> None:
    ranks = [_pp2_dp2(r) for r in range(4)]
    odd = ProcessGroup(name="4", desc="mesh_dp", ranks=[1, 3])
    ranks[3] = ranks[3].model_copy(update={"process_groups": [*ranks[3].process_groups[:2], odd]})
    groups = split_jobs(ranks)
    assert list(groups.foreign) == [3] and "process group 4 (mesh_dp) holds ranks 1,3, not 2-3" in groups.foreign[3]


def test_a_later_recording_is_another_job() -> None:
    ranks = [_rank(r) for r in range(3)] + [_rank(r, start=T0 + 1800) for r in (3, 4)]
    assert split_jobs(ranks).foreign == {3: "recorded 30 min apart", 4: "recorded 30 min apart"}


def test_ranks_that_say_nothing_go_with_the_largest_group() -> None:
    ranks = [_rank(r) for r in range(3)] + [_rank(3, world=None, start=None, fp=None)]
    assert split_jobs(ranks).foreign == {}
