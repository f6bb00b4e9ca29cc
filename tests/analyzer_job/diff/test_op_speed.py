"""The unchanged ops' per-call speed: every op slower alike (a slower machine) reads as that factor, added work or
one slower op does not move it, too few unchanged ops give none, and the diff carries it with a note."""

from __future__ import annotations

import pytest
from report_maker import noisy_job, rank, report

from stepscope_analyzer.diff import DiffConfig, diff_reports
from stepscope_analyzer.diff.name_deltas import name_times
from stepscope_analyzer.diff.op_speed import unchanged_op_speed
from stepscope_contract.report import Report

pytestmark = pytest.mark.unit

OPS = {f"aten::op{i}": (1000.0 * (i + 1), 10 * (i + 1)) for i in range(8)}  # name -> (µs over 10 steps, calls)


def job(ops: dict[str, tuple[float, int]], step_us: float = 50_000.0) -> Report:
    return report([rank(r, [step_us] * 10, functions=ops) for r in range(2)])


def speed(base: dict[str, tuple[float, int]], cand: dict[str, tuple[float, int]]) -> float | None:
    found = unchanged_op_speed(name_times(job(base)), name_times(job(cand)))
    return None if found is None else found.pct


def test_every_op_slower_alike_reads_as_that_factor() -> None:
    assert speed(OPS, {n: (t * 1.2, c) for n, (t, c) in OPS.items()}) == pytest.approx(20.0)
    assert speed(OPS, OPS) == pytest.approx(0.0)


def test_added_work_and_one_slower_op_leave_it_alone() -> None:
    more = dict(OPS) | {"aten::op7": (OPS["aten::op7"][0] * 2, OPS["aten::op7"][1] * 2)}  # twice the calls
    more["added_work"] = (30_000.0, 90)
    more["aten::op6"] = (OPS["aten::op6"][0] * 3, OPS["aten::op6"][1])  # one op got slower
    assert speed(OPS, more) == pytest.approx(0.0)


def test_too_few_unchanged_ops_say_nothing() -> None:
    assert speed(OPS, {n: (t, c * 2) for n, (t, c) in OPS.items()}) is None  # every op called twice as often
    assert speed(dict(list(OPS.items())[:3]), dict(list(OPS.items())[:3])) is None  # three ops


def test_collectives_and_step_spans_are_not_work() -> None:
    base = OPS | {"gloo:all_reduce": (90_000.0, 10), "ProfilerStep#3": (500_000.0, 1)}
    cand = OPS | {"gloo:all_reduce": (300_000.0, 10), "ProfilerStep#3": (900_000.0, 1)}
    assert speed(base, cand) == pytest.approx(0.0)


def test_the_diff_carries_it_and_notes_a_machine_wide_shift() -> None:
    slower = {n: (t * 1.18, c) for n, (t, c) in OPS.items()}
    d = diff_reports(job(OPS), job(slower, 59_000.0), DiffConfig(max_regression_pct=15.0))
    assert d.unchanged_ops_speed_pct == pytest.approx(18.0) and d.unchanged_ops == len(OPS)
    assert any("ran 18.0% slower per call" in n and "machine's speed" in n for n in d.notes), d.notes
    same = diff_reports(job(OPS), job(OPS), DiffConfig())
    assert same.unchanged_ops_speed_pct == pytest.approx(0.0) and not any("per call" in n for n in same.notes)
    assert diff_reports(noisy_job(seed=1), noisy_job(seed=2)).unchanged_ops_speed_pct is None  # no ops listed
