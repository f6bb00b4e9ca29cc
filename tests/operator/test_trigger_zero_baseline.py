"""A step-time-regression baseline of 0 ms (steps that take no time, or a hostile series) is a note, never a
ZeroDivisionError that stops the trigger from evaluating again; a rate computed from a tiny positive step never
reaches the trigger's status as Infinity (the status patch is finite)."""

from __future__ import annotations

import json

import pytest

from stepscope_contract.step_telemetry import RankSteps
from stepscope_contract.trigger import ProfileTriggerStatus, StepTimeRegression, TriggerConditions
from stepscope_operator.triggers.conditions import evaluate, regression
from stepscope_operator.triggers.evaluation import observe, status_patch
from stepscope_operator.triggers.telemetry_client import Pull

pytestmark = pytest.mark.unit


def _ranks(values: list[float], world: int = 2) -> list[RankSteps]:
    flags = [False] * len(values)
    return [
        RankSteps(rank=r, world_size=world, steps_total=len(values), duration_ms=values, profiled=flags)
        for r in range(world)
    ]


def test_a_zero_baseline_is_a_note() -> None:
    spec = StepTimeRegression(steps=20, baseline_steps=100)
    ranks = _ranks([0.0] * 100 + [50.0] * 20)
    found, note = regression(ranks, spec)
    assert found is None
    assert "baseline's median step is 0 ms" in note
    verdict = evaluate(ranks, TriggerConditions(step_time_regression=spec))
    assert verdict.findings == () and len(verdict.notes) == 1


def test_a_positive_baseline_still_fires() -> None:
    spec = StepTimeRegression(steps=20, baseline_steps=100)
    found, note = regression(_ranks([10.0] * 100 + [50.0] * 20), spec)
    assert note == "" and found is not None
    assert "5.00x its baseline of 10.0 ms" in found.message


def test_a_tiny_step_never_writes_infinity() -> None:
    pull = Pull(ranks=tuple(_ranks([1e-320] * 10, world=1)), answered=1)
    observed = observe(1, pull)
    patch = status_patch(ProfileTriggerStatus(observed=observed))
    assert observed.steps_per_second == float("inf")  # what the arithmetic gives
    text = json.dumps(patch, allow_nan=False)  # raises on NaN or Infinity
    assert json.loads(text)["observed"]["pods"] == 1
    assert patch["observed"].get("stepsPerSecond") is None
