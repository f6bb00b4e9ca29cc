"""The measured CPU wait of the hook's `stepscopeCpu` block: matched to the recorded steps by their ProfilerStep
number, refused when it does not cover every step or is malformed, and turned into a dilation no smaller than the
inferred one."""

from __future__ import annotations

from typing import Any

import pytest

from stepscope_analyzer.analyses.cpu_contention import measured_waits, with_measured_waits

pytestmark = pytest.mark.unit


def _block(rows: list[Any]) -> dict[str, Any]:
    return {"stepscopeCpu": {"source": "schedstat", "steps": rows}}


def test_waits_are_matched_to_steps_by_their_profiler_step_number() -> None:
    meta = _block([[4, 900, 30], [5, 800, 0], [6, 700, 12_000]])
    assert measured_waits(meta, ["ProfilerStep#6", "ProfilerStep#4"]) == [12_000.0, 30.0]


@pytest.mark.parametrize(
    ("meta", "names"),
    [
        ({}, ["ProfilerStep#0"]),  # a trace recorded without the hook
        (_block([[0, 10, 5]]), ["ProfilerStep#0", "ProfilerStep#1"]),  # a step not covered
        (_block([[0, 10, -5]]), ["ProfilerStep#0"]),  # a negative wait is not a measurement
        (_block([[0, "10", 5]]), ["ProfilerStep#0"]),
        (_block([[0, 10]]), ["ProfilerStep#0"]),
        ({"stepscopeCpu": {"steps": "nope"}}, ["ProfilerStep#0"]),
        (_block([[0, 10, 5]]), ["my_step"]),  # a step span not named by number
    ],
)
def test_a_block_that_does_not_cover_every_step_is_not_used(meta: dict[str, Any], names: list[str]) -> None:
    assert measured_waits(meta, names) is None


def test_dilation_is_active_time_over_active_time_less_the_wait_and_never_below_the_inferred_one() -> None:
    out = with_measured_waits([1.0, 1.5, 1.2, 1.3], [10_000.0, 0.0, 50_000.0, 5.0], [20_000.0, 10_000.0, 40_000.0, 0.0])
    assert out[0] == pytest.approx(2.0)  # half of the active time waiting for a CPU
    assert out[1] == pytest.approx(1.5)  # no measured wait: the inference stands
    assert out[2] == pytest.approx(20.0)  # a wait beyond the active time is capped at 95% of it
    assert out[3] == pytest.approx(1.3)  # no active time: the inference stands
