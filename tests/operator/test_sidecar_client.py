"""The start bodies the operator sends: one serialisation per tick, each target's rank spliced in."""

from __future__ import annotations

import json

import pytest

from stepscope_contract.wire import CaptureOptions, CaptureRequest, SessionRef, StorageDestination
from stepscope_operator.sidecars.client import StartBodies

pytestmark = pytest.mark.unit


def _request(rank: int | None = None) -> CaptureRequest:
    return CaptureRequest(
        capture_id="cap-7",
        session=SessionRef(namespace="ml", name='resnet "night"', uid="0000abcd-1111"),
        rank=rank,
        options=CaptureOptions(steps=5, skip_steps=2, activities=["cpu"], timeout_seconds=240, step_timeout_seconds=60),
        destination=StorageDestination(session_uri="s3://b/sessions/ml/resnet-0000abcd", region="eu-west-1"),
    )


@pytest.mark.parametrize("rank", [None, 0, 7, 1023])
def test_each_body_is_the_request_with_that_rank(rank: int | None) -> None:
    bodies = StartBodies(_request(rank=5))  # the request's own rank is ignored: each body carries its target's
    body = bodies.for_rank(rank)
    assert CaptureRequest.model_validate_json(body) == _request(rank)
    assert json.loads(body) == _request(rank).wire()  # no field more or less than the model's own JSON form
