"""Ranks that share an oversubscribed CPU (diagnosis.shared_cpu): which ranks are on a busy node, and what taking a
rank's extra work off such a node saves in one step."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis.rank_costs import RankSamples
from stepscope_analyzer.diagnosis.shared_cpu import BUSY_DILATION, busy_ranks, cpu_work, dilation, shared_saving

pytestmark = pytest.mark.unit


def _samples(rank: int, machine: str | None, stretch: float, compute: float = 100.0) -> RankSamples:
    wall = np.full(4, compute)
    zero = np.zeros(4)
    costs = {"compute": wall, "host": np.full(4, 10.0), "communication": zero}
    tested = {"compute": wall / stretch, "host": np.full(4, 10.0 / stretch), "communication": zero}
    return RankSamples(rank, None, wall + 10.0, costs, tested, zero, {}, True, machine=machine)


def test_a_node_is_busy_from_the_median_stretch_of_two_or_more_of_its_ranks() -> None:
    busy = [_samples(0, "a", 2.0), _samples(1, "a", 1.9), _samples(2, "b", 3.0), _samples(3, None, 3.0)]
    assert busy_ranks(busy) == {0, 1}  # b holds one rank, 3 has no node or host name
    calm = [_samples(0, "a", 1.2), _samples(1, "a", BUSY_DILATION - 0.01), _samples(2, "a", 4.0)]
    assert busy_ranks(calm) == set() and dilation(calm[1]) == pytest.approx(BUSY_DILATION - 0.01)


def test_cpu_work_is_the_step_s_work_less_its_contention_stretches() -> None:
    s = _samples(0, "a", 2.0)
    assert cpu_work(s, [110.0, 110.0, 110.0, 110.0]) == pytest.approx([55.0] * 4)  # (100 + 10) / 2


def test_taking_work_off_a_busy_node_stretches_every_rank_there_less_up_to_the_work_taken() -> None:
    """Rank 3 does 40 more of CPU work, but the scheduler stretched rank 0 the most this step: the plain replay saves
    nothing; on a busy node the 40 taken off shorten every rank's stretched work by 40 / 870 of the node's."""
    wall = {0: 240.0, 1: 200.0, 2: 200.0, 3: 230.0}
    cpu = {0: 100.0, 1: 100.0, 2: 100.0, 3: 140.0}
    kw = {"node": dict.fromkeys(wall, "a"), "busy": frozenset(wall)}
    assert shared_saving(wall, cpu, [3], (200.0, 100.0), **kw) == pytest.approx(240.0 * 40.0 / 870.0)
    assert shared_saving(wall, cpu, [3], (200.0, 139.0), **kw) <= 1.0  # never more than the CPU work taken off
    apart = {"node": dict(enumerate("abcd")), "busy": frozenset(wall)}
    assert shared_saving(wall, cpu, [3], (200.0, 100.0), **apart) == 0.0  # alone on its node: the plain replay's


def test_ranks_that_are_not_stretched_gain_nothing_from_the_work_taken_off() -> None:
    wall = dict.fromkeys(range(4), 100.0)
    saved = shared_saving(wall, dict(wall), [3], (100.0, 90.0), node=dict.fromkeys(wall, "a"), busy=frozenset(wall))
    assert saved == 0.0  # none runs faster than its CPU work
