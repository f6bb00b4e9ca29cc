from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from stepscope_contract.errors import describe_validation_error
from stepscope_contract.session import (
    Phase,
    ProfileSessionSpec,
    ProfileSessionStatus,
    TargetState,
)

pytestmark = pytest.mark.unit

MINIMAL = {"targets": {"selector": {"matchLabels": {"app": "t"}}}, "storage": {"uri": "s3://bucket/p"}}


def test_defaults_fill_in() -> None:
    spec = ProfileSessionSpec.model_validate(MINIMAL)
    assert spec.capture.steps == 5
    assert spec.targets.max_targets == 256
    assert spec.wire()["capture"]["gpuMetrics"]["intervalMs"] == 100


def test_rank_set_from_spec() -> None:
    spec = ProfileSessionSpec.model_validate(
        {**MINIMAL, "targets": {"jobRef": {"kind": "Job", "name": "j"}, "ranks": "0-1,5"}}
    )
    assert spec.targets.rank_set() == frozenset({0, 1, 5})


def test_messages_name_the_field() -> None:
    bad = {**MINIMAL, "capture": {"steps": 0, "gpuMetrics": {"intervalMs": 1}}}
    with pytest.raises(ValidationError) as info:
        ProfileSessionSpec.model_validate(bad)
    text = describe_validation_error(info.value)
    assert "spec.capture.steps" in text
    assert "spec.capture.gpuMetrics.intervalMs" in text


def test_unknown_field_is_an_error() -> None:
    with pytest.raises(ValidationError) as info:
        ProfileSessionSpec.model_validate({**MINIMAL, "captur": {}})
    assert "spec.captur" in describe_validation_error(info.value)


def test_selector_needs_content_and_expressions_are_checked() -> None:
    with pytest.raises(ValidationError, match="empty selector"):
        ProfileSessionSpec.model_validate({**MINIMAL, "targets": {"selector": {}}})
    with pytest.raises(ValidationError, match="needs at least one value"):
        ProfileSessionSpec.model_validate(
            {**MINIMAL, "targets": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}}
        )


def test_status_round_trip_and_terminal_flags() -> None:
    status = ProfileSessionStatus.model_validate(
        {
            "phase": "Capturing",
            "progress": "1/2",
            "reportURL": "s3://b/r.html",
            "targets": [
                {
                    "pod": "p0",
                    "rank": 0,
                    "state": "Captured",
                    "lastTransitionTime": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
                }
            ],
            "kopf": {"progress": {}},
        }
    )
    assert status.report_url == "s3://b/r.html"
    wire = status.wire()
    assert wire["reportURL"] == "s3://b/r.html" and "kopf" not in wire
    assert status.targets[0].state.terminal and not TargetState.SIGNALLED.terminal
    assert Phase.PARTIALLY_SUCCEEDED.terminal and not Phase.ANALYZING.terminal
