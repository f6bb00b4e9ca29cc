"""The status merge patch: ReportReady upserted, other conditions kept, resourceVersion guarded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stepscope_analyzer.status_patch import status_patch
from stepscope_contract.session import ProfileSessionStatus, ReportSummary

pytestmark = pytest.mark.unit

T0 = "2026-01-01T00:00:00Z"
NOW = datetime(2026, 2, 2, tzinfo=UTC)


def _obj(conditions: list[dict[str, str]]) -> dict[str, object]:
    return {
        "metadata": {"generation": 3, "resourceVersion": "42"},
        "status": {"phase": "Analyzing", "conditions": conditions},
    }


def test_adds_report_ready_and_keeps_the_others() -> None:
    accepted = {"type": "Accepted", "status": "True", "reason": "SpecValid", "lastTransitionTime": T0}
    summary = ReportSummary(verdict="fine", slowest_rank=2)
    patch = status_patch(
        _obj([accepted]), ok=True, message="fine", summary=summary, report_url="s3://b/r.html",
        report_json_url="s3://b/r.json", now=NOW,
    )  # fmt: skip
    assert patch["metadata"] == {"resourceVersion": "42"}
    status = patch["status"]
    assert "phase" not in status  # the operator's
    assert status["conditions"][0] == {**accepted, "message": ""}  # as read, in the contract's wire form
    ready = status["conditions"][1]
    assert ready["type"] == "ReportReady" and ready["status"] == "True" and ready["observedGeneration"] == 3
    assert status["summary"] == {"verdict": "fine", "slowestRank": 2, "slowRanks": [], "hungRanks": [],
                                 "erroredRanks": []}  # fmt: skip
    assert status["reportURL"] == "s3://b/r.html" and status["reportJSONURL"] == "s3://b/r.json"
    ProfileSessionStatus.model_validate(status)


def test_transition_time_changes_only_with_the_status() -> None:
    old = {"type": "ReportReady", "status": "True", "reason": "ReportWritten", "lastTransitionTime": T0}
    same = status_patch(_obj([old]), ok=True, message="again", now=NOW)["status"]["conditions"]
    assert len(same) == 1 and same[0]["lastTransitionTime"] == T0 and same[0]["message"] == "again"
    flipped = status_patch(_obj([old]), ok=False, message="boom", now=NOW)["status"]["conditions"]
    assert flipped[0]["status"] == "False" and flipped[0]["reason"] == "AnalysisFailed"
    assert flipped[0]["lastTransitionTime"].startswith("2026-02-02")


def test_regressed_is_upserted_beside_report_ready() -> None:
    from stepscope_contract.session import ConditionStatus

    finished = {"type": "Finished", "status": "False", "reason": "Running", "lastTransitionTime": T0}
    patch = status_patch(
        _obj([finished]), ok=True, message="fine", now=NOW,
        regressed=(ConditionStatus.TRUE, "Regressed", "steps are 40% slower"),
    )  # fmt: skip
    after = ProfileSessionStatus.model_validate(patch["status"])
    by_type = {c.type.value: c for c in after.conditions}
    assert set(by_type) == {"Finished", "ReportReady", "Regressed"}
    assert by_type["Regressed"].status is ConditionStatus.TRUE and by_type["Regressed"].reason == "Regressed"
    assert by_type["Regressed"].message == "steps are 40% slower" and by_type["Regressed"].observed_generation == 3
