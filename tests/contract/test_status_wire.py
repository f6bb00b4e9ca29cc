"""The status goes to the API server only through the typed model: the patch names fields the CRD knows (a
misspelt one is an error where it is written, not a key the structural schema prunes), holds only what changed,
and a status with one unreadable field is read without it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from stepscope_contract.session import (
    AnalysisStage,
    Condition,
    ConditionStatus,
    ConditionType,
    Phase,
    ProfileSessionStatus,
    TargetState,
    TargetStatus,
)
from stepscope_contract.status_wire import read_status, status_patch

pytestmark = pytest.mark.unit
CRD = Path(__file__).resolve().parents[2] / "crds" / "profilesessions.stepscope.dev.yaml"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _crd_status_properties() -> set[str]:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    return set(schema["properties"])


def _full() -> ProfileSessionStatus:
    return ProfileSessionStatus(
        phase=Phase.ANALYZING,
        message="m",
        observed_generation=2,
        conditions=[
            Condition(type=ConditionType.CAPTURED, status=ConditionStatus.TRUE, reason="R", last_transition_time=NOW)
        ],
        capture_id="c-1",
        start_time=NOW,
        capture_deadline=NOW,
        completion_time=NOW,
        targets=[TargetStatus(pod="p", rank=0, state=TargetState.CAPTURED)],
        artifacts_uri="s3://b/p",
        analyzer_job="s-analyze-map",
        analysis_stage=AnalysisStage.MAP,
        report_url="s3://b/r.html",
        report_json_url="s3://b/r.json",
    )


def test_every_field_the_patch_can_hold_is_in_the_crd() -> None:
    patch = status_patch(ProfileSessionStatus(), _full())
    assert set(patch) <= _crd_status_properties(), set(patch) - _crd_status_properties()
    assert patch["analysisStage"] == "Map" and patch["reportURL"] == "s3://b/r.html"
    assert patch["startTime"] == "2026-03-01T12:00:00Z"
    assert patch["targets"] == [{"pod": "p", "rank": 0, "state": "Captured", "message": "", "attempts": 0}]


def test_only_what_changed_is_written_and_none_removes() -> None:
    before = _full()
    after = before.model_copy(deep=True)
    after.phase = Phase.SUCCEEDED
    after.analysis_stage = None
    assert status_patch(before, after) == {"phase": "Succeeded", "analysisStage": None}
    assert status_patch(before, before.model_copy(deep=True)) == {}


def test_a_misspelt_field_is_an_error_where_it_is_written() -> None:
    status = ProfileSessionStatus()
    with pytest.raises(ValueError, match="analyzis_stage"):
        status.analyzis_stage = AnalysisStage.MAP  # type: ignore[attr-defined]


def test_an_unreadable_field_is_dropped_not_the_status() -> None:
    raw = status_patch(ProfileSessionStatus(), _full())
    raw["phase"] = "Bogus"
    raw["counts"] = {"total": -1}
    status = read_status(raw)
    assert status.phase is Phase.PENDING and status.counts.total == 0  # the defaults
    assert status.capture_id == "c-1" and status.analysis_stage is AnalysisStage.MAP  # the rest as written
    assert read_status(None) == ProfileSessionStatus() and read_status("garbage") == ProfileSessionStatus()
