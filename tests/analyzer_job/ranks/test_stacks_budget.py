"""The hung ranks' stacks are kept within one budget per analysis (max_stacks_total_bytes): ranks past it keep
their hang evidence without the stacks and get an error that names the limit; the ranks before it keep theirs."""

from __future__ import annotations

import pytest

from stepscope_analyzer import limits
from stepscope_analyzer.ranks.hang_evidence import HangEvidence
from stepscope_analyzer.ranks.pipeline import RankOutcome, within_stacks_budget
from stepscope_contract.report import RankReport, RankStatus

pytestmark = pytest.mark.unit


def _hung(rank: int, stacks: str) -> tuple[int, RankOutcome]:
    summary = RankReport(rank=rank, status=RankStatus.OK)
    return rank, RankOutcome(summary=summary, hang=HangEvidence(rank=rank, hung=True, stacks=stacks))


def test_stacks_past_the_total_are_dropped_by_name() -> None:
    outcomes = [_hung(r, "x" * 1000) for r in range(5)]
    with limits.override(max_stacks_total_bytes=2500):
        kept = dict(within_stacks_budget(outcomes))
    assert [len(kept[r].hang.stacks) for r in range(5)] == [1000, 1000, 0, 0, 0]  # type: ignore[union-attr]
    assert all(kept[r].hang is not None and kept[r].hang.hung for r in range(5))  # type: ignore[union-attr]
    assert [len(kept[r].errors) for r in range(5)] == [0, 0, 1, 1, 1]
    assert "max_stacks_total_bytes=2500" in kept[3].errors[0].message
    assert "STEPSCOPE_LIMIT_MAX_STACKS_TOTAL_BYTES" in kept[3].errors[0].message


def test_a_refused_rank_leaves_the_budget_to_smaller_ones() -> None:
    outcomes = [_hung(0, "x" * 10), _hung(1, "x" * 100), _hung(2, "x" * 10)]
    with limits.override(max_stacks_total_bytes=50):
        kept = dict(within_stacks_budget(outcomes))
    assert [len(kept[r].hang.stacks) for r in range(3)] == [10, 0, 10]  # type: ignore[union-attr]


def test_ranks_without_stacks_cost_nothing() -> None:
    outcomes = [_hung(0, ""), (1, RankOutcome(summary=RankReport(rank=1, status=RankStatus.OK))), _hung(2, "ab")]
    with limits.override(max_stacks_total_bytes=2):
        kept = dict(within_stacks_budget(outcomes))
    assert kept[2].hang is not None and kept[2].hang.stacks == "ab" and kept[2].errors == []
