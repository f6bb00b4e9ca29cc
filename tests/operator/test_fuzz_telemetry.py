"""Property tests (hypothesis) of step telemetry, from the ring file to the trigger's status:
- any ring file bytes give a Ring or None, and a Ring always makes a valid wire RankSteps;
- any reply body gives a PodSteps or a ValidationError, and a PodSteps holds no NaN or Infinity;
- the trigger conditions judge any valid series without an exception, and what an evaluation writes to the
  trigger's status is finite JSON."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from stepscope_contract.finite import non_finite_paths
from stepscope_contract.step_telemetry import (
    HEADER_FIXED,
    HEADER_SIZE,
    MAGIC,
    SLOT,
    SLOT_SIZE,
    VERSION,
    PodSteps,
    RankSteps,
)
from stepscope_contract.trigger import ProfileTriggerStatus, Stall, StepTimeRegression, Straggler, TriggerConditions
from stepscope_operator.triggers.conditions import evaluate
from stepscope_operator.triggers.evaluation import observe, status_patch
from stepscope_operator.triggers.telemetry_client import Pull
from stepscope_sidecar.step_telemetry import parse_ring
from stepscope_sidecar.step_telemetry import rank_steps as wire_steps
from stepscope_testing.hostile_inputs import encoded, rank_steps

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]
QUICK = settings(max_examples=max(20, settings.default.max_examples // 3))
ALL = TriggerConditions(
    straggler=Straggler(steps=5), step_time_regression=StepTimeRegression(steps=5, baseline_steps=10), stall=Stall()
)


@st.composite
def ring_bytes(draw: st.DrawFn) -> bytes:
    """A ring header that passes the magic check, then slots and counters of any bytes."""
    capacity = draw(st.integers(1, 16))
    header = bytearray(HEADER_SIZE)
    HEADER_FIXED.pack_into(
        header, 0, MAGIC, VERSION, HEADER_SIZE, capacity, SLOT_SIZE, draw(st.integers(0, 2**31 - 1)),
        draw(st.integers(-(2**31), 2**31 - 1)), draw(st.integers(-(2**63), 2**63 - 1)), draw(st.floats()),
    )  # fmt: skip
    header[48 : 48 + 32] = draw(st.binary(min_size=32, max_size=32))
    slots = b"".join(
        SLOT.pack(draw(st.integers(0, 40)), draw(st.floats()), *(draw(st.floats(width=32)) for _ in range(3)), 1)
        for _ in range(capacity)
    )
    return bytes(header) + slots + draw(st.binary(max_size=16))


@QUICK
@given(ring_bytes() | st.binary(max_size=700), st.integers(1, 64))
def test_any_ring_gives_valid_wire_steps(data: bytes, last: int) -> None:
    ring = parse_ring(data, last)
    if ring is None:
        return
    steps = wire_steps(ring, now=2e9)
    assert isinstance(steps, RankSteps)
    assert non_finite_paths(json.loads(steps.model_dump_json())) == []


@QUICK
@given(encoded(st.fixed_dictionaries({"pod": st.text(max_size=4), "ranks": st.lists(rank_steps(), max_size=3)})))
def test_any_reply_gives_finite_steps_or_a_validation_error(body: bytes) -> None:
    try:
        pod = PodSteps.model_validate_json(body)
    except ValidationError:
        return
    assert non_finite_paths(pod.model_dump()) == []


def _series(docs: list[dict[str, object]]) -> list[RankSteps]:
    out = []
    for doc in docs:
        try:
            out.append(RankSteps.model_validate_json(json.dumps(doc)))
        except ValidationError:
            continue
    return out


finite = st.floats(0, 1e6) | st.sampled_from([0.0, 1e-320, 5e-324])


@st.composite
def valid_rank(draw: st.DrawFn, rank: int) -> RankSteps:
    n = draw(st.integers(0, 40))
    durations = draw(st.lists(finite, min_size=n, max_size=n))
    return RankSteps(
        rank=rank,
        world_size=4,
        steps_total=n,
        seconds_since_last_step=draw(st.none() | finite),
        closed=draw(st.booleans()),
        ended_at=draw(st.lists(finite, min_size=n, max_size=n)),
        duration_ms=durations,
        backward_ms=draw(st.lists(finite, min_size=n, max_size=n)),
        data_wait_ms=draw(st.lists(finite, min_size=n, max_size=n)),
        profiled=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
    )


@QUICK
@given(st.lists(st.integers(0, 7), max_size=4, unique=True).flatmap(lambda rs: st.tuples(*(valid_rank(r) for r in rs))))
def test_conditions_judge_any_series_and_the_status_is_finite(ranks: tuple[RankSteps, ...]) -> None:
    verdict = evaluate(list(ranks), ALL)
    assert all(f.message for f in verdict.findings)
    patch = status_patch(ProfileTriggerStatus(observed=observe(len(ranks), Pull(ranks=ranks, answered=len(ranks)))))
    json.dumps(patch, allow_nan=False)


@QUICK
@given(st.lists(rank_steps(), max_size=3))
def test_bent_series_that_validate_are_judged(docs: list[dict[str, object]]) -> None:
    ranks = {r.rank: r for r in _series(docs)}
    evaluate(list(ranks.values()), ALL)


def test_a_ring_header_is_what_the_reader_checks() -> None:
    assert struct.calcsize("<8sIIIIiiqd") == HEADER_FIXED.size
