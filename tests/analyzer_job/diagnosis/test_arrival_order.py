"""Who arrives last at the matched collectives, step after step (diagnosis.arrival_order over waits.last_arrivals):
- each matched collective names the member whose call was shortest;
- a step's last is the rank last at most of its collectives (none on a tie), and the p-value is the binomial tail
  of being that in k of n steps among m exchangeable peers, times the ranks tested;
- fewer than four peers are not tested; collectives are not the samples, steps are."""

from __future__ import annotations

from math import comb

import pytest

from stepscope_analyzer.diagnosis.arrival_order import binomial_tail, last_arrival_tests
from stepscope_analyzer.diagnosis.facts import job_facts
from stepscope_analyzer.diagnosis.waits import Arrival, arrivals_of, last_arrivals, matched_waits, waits_of
from stepscope_contract.report import CommCalls, RankReport

pytestmark = pytest.mark.unit


def _rank(rank: int, durations: list[list[float]]) -> RankReport:
    """A rank whose gloo all_reduces (no recorded group) take `durations[step][k]` µs."""
    calls = [(s, d) for s, per_step in enumerate(durations) for d in per_step]
    comm = CommCalls(
        ops=["allreduce"],
        groups=[],
        op_index=[0] * len(calls),
        group_index=[-1] * len(calls),
        peer=[-1] * len(calls),
        step=[s for s, _ in calls],
        dur_us=[d for _, d in calls],
    )
    return RankReport(rank=rank, comm_calls=comm)


def test_each_matched_collective_names_the_member_whose_call_was_shortest() -> None:
    ranks = [_rank(0, [[900.0, 500.0]]), _rank(1, [[100.0, 700.0]]), _rank(2, [[600.0, 50.0]])]
    assert last_arrivals(ranks, None) == [Arrival(0, (0, 1, 2), 1), Arrival(0, (0, 1, 2), 2)]


def test_the_job_s_facts_read_the_arrivals_from_the_columns_its_matched_waits_were_read_from() -> None:
    """The calls are put in columns once per job (waits.call_table): the arrivals and the waits share them."""
    ranks = [_rank(0, [[900.0, 500.0]]), _rank(1, [[100.0, 700.0]]), _rank(2, [[600.0, 50.0]])]
    facts = job_facts(ranks)
    table = facts.calls
    assert table is not None and facts.calls is table
    assert facts.arrivals == last_arrivals(facts.ok, None) == arrivals_of(table)
    assert facts.waits == matched_waits(facts.ok, None) == waits_of(table) != []


def test_binomial_tail() -> None:
    assert binomial_tail(0, 5, 0.25) == 1.0
    assert binomial_tail(5, 5, 0.25) == pytest.approx(0.25**5)
    assert binomial_tail(2, 3, 0.5) == pytest.approx((comb(3, 2) + 1) / 8)


def _arrivals(lasts: list[list[int]], members: tuple[int, ...] = (0, 1, 2, 3)) -> list[Arrival]:
    return [Arrival(step, members, last) for step, per_step in enumerate(lasts) for last in per_step]


def test_a_rank_last_in_every_step_is_unlikely_by_chance_over_the_ranks_tested() -> None:
    tests = last_arrival_tests(_arrivals([[3, 3]] * 5))
    top = tests[0]
    assert (top.rank, top.last_steps, top.steps, top.last_calls, top.calls) == (3, 5, 5, 10, 10)
    assert top.p_value == pytest.approx(4 * 0.25**5)  # Bonferroni over the four ranks tested
    assert all(t.p_value == 1.0 for t in tests[1:])


def test_steps_not_collectives_are_the_samples_and_a_tie_names_no_step_last() -> None:
    """Rank 3 is last at 8 of 10 collectives, but in only 3 of 5 steps at most of them: no better than 3 of 5."""
    tests = {t.rank: t for t in last_arrival_tests(_arrivals([[3, 3], [3, 3], [3, 3], [3, 1], [3, 2]]))}
    assert (tests[3].last_steps, tests[3].last_calls) == (3, 8)
    assert tests[3].p_value == pytest.approx(min(1.0, 4 * binomial_tail(3, 5, 0.25)))
    assert tests[1].last_steps == tests[2].last_steps == 0


def test_fewer_than_four_peers_are_not_tested() -> None:
    """With two or three peers one of them is always last: which one is for the cost tests to judge."""
    assert last_arrival_tests(_arrivals([[1]] * 8, members=(0, 1))) == []
    assert last_arrival_tests(_arrivals([[2]] * 8, members=(0, 1, 2))) == []
