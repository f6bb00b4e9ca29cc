"""The replay's saving for each peer against the savings chance would give it (diagnosis.gain_permutation):
- each (rank, step)'s saving is the step's longest work less the longest with that rank's set to the others' median;
- the p-value is the share of the permutation distribution (a random rank's saving drawn in every step) at or above
  the rank's summed saving, times the ranks tested, exact where the combinations are few, sampled with a fixed seed
  beyond;
- magnitudes count: a rank much the heaviest in four of five steps and level in the fifth clears it, where being
  the heaviest four times in five is chance among four; a heaviest rank that changes from step to step does not;
- fewer than four ranks, or ranks with different recorded steps, are not tested."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis.arrival_order import binomial_tail
from stepscope_analyzer.diagnosis.gain_permutation import MAX_EXACT, gain_permutation_tests, step_savings

pytestmark = pytest.mark.unit


def test_a_step_s_saving_is_the_heaviest_rank_s_lead_over_the_next_or_the_others_median() -> None:
    work = np.asarray([[100.0], [80.0], [70.0], [60.0]])
    assert step_savings(work)[:, 0].tolist() == [20.0, 0.0, 0.0, 0.0]


def test_a_rank_heaviest_by_a_margin_in_every_step_has_the_least_p_value_the_steps_allow() -> None:
    work = {0: [100.0] * 5, 1: [50.0] * 5, 2: [51.0] * 5, 3: [49.0] * 5}
    top, *rest = gain_permutation_tests(work)
    assert (top.rank, top.heaviest_steps, top.steps, top.saved_us) == (0, 5, 5, 49.0)  # over the next heaviest
    assert top.p_value == pytest.approx(4 * 0.25**5)  # Bonferroni over the four ranks tested
    assert all(t.p_value == 1.0 for t in rest)  # the others never save anything


def test_magnitudes_count_where_the_order_alone_is_chance() -> None:
    """Rank 2 is much the heaviest in four of five steps and level with the others in the fifth, where another peer
    is the heaviest by a little: being the heaviest four times in five is chance among four (the binomial tail, times
    four, is 0.0625); the savings are not: only the draws of its own large saving in all four steps reach them."""
    level = [[97.0, 100.0, 99.0, 98.0]]
    heavy = [[100.0, 101.0, 160.0, 99.0]] * 4
    steps = heavy + level
    work = {r: [s[r] for s in steps] for r in range(4)}
    tests = {t.rank: t for t in gain_permutation_tests(work)}
    assert tests[2].heaviest_steps == 4 and 4 * binomial_tail(4, 5, 0.25) == pytest.approx(0.0625)
    assert tests[2].p_value == pytest.approx(4 * 0.25**4)
    assert min(t.p_value for r, t in tests.items() if r != 2) == 1.0


def test_a_heaviest_rank_that_changes_from_step_to_step_is_chance() -> None:
    """Each of four ranks is the heaviest by the same margin in turn (rank 0 twice in eight steps)."""
    work = {r: [130.0 if (t % 4) == r else 100.0 for t in range(8)] for r in range(4)}
    assert all(t.p_value == 1.0 for t in gain_permutation_tests(work))


def test_many_combinations_are_sampled_with_a_fixed_seed() -> None:
    rng = np.random.default_rng(0)
    work = {r: (100.0 + rng.normal(0.0, 5.0, 8) + (40.0 if r == 5 else 0.0)).tolist() for r in range(16)}
    assert MAX_EXACT < 16**8
    first, again = gain_permutation_tests(work), gain_permutation_tests(work)
    assert first == again and first[0].rank == 5 and first[0].p_value < 0.01


def test_too_few_ranks_or_unequal_steps_are_not_tested() -> None:
    assert gain_permutation_tests({0: [100.0] * 5, 1: [50.0] * 5, 2: [50.0] * 5}) == []
    assert gain_permutation_tests({0: [100.0] * 5, 1: [50.0] * 5, 2: [50.0] * 5, 3: [50.0] * 4}) == []
