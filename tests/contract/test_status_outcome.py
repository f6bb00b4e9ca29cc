"""The analysis' part of a session's status, set by the operator from the outcome the analyzer Job handed back
(status_wire.apply_outcome through the one condition setter): ReportReady set and the other conditions kept, the
transition time moving only with the status, Regressed beside ReportReady, one message cap, the merge patch
holding only what changed, and the verdict or a failure's why left to the session's message (told once)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stepscope_contract.analysis_documents import AnalysisOutcome, RegressedVerdict
from stepscope_contract.session import ConditionStatus, ProfileSessionStatus, ReportSummary
from stepscope_contract.status_wire import MAX_MESSAGE, apply_outcome, read_status, status_patch

pytestmark = pytest.mark.unit

T0 = "2026-01-01T00:00:00Z"
NOW = datetime(2026, 2, 2, tzinfo=UTC)


def _status(conditions: list[dict[str, str]]) -> ProfileSessionStatus:
    return read_status({"phase": "Analyzing", "conditions": conditions})


def test_report_ready_is_added_and_the_other_conditions_kept() -> None:
    accepted = {"type": "Accepted", "status": "True", "reason": "SpecValid", "lastTransitionTime": T0}
    before = _status([accepted])
    after = before.model_copy(deep=True)
    summary = ReportSummary(verdict="fine", slowest_rank=2)
    outcome = AnalysisOutcome(ok=True, message="fine", summary=summary, report_url="s3://b/r.html",
                              report_json_url="s3://b/r.json")  # fmt: skip
    apply_outcome(after, outcome, now=NOW, generation=3)
    patch = status_patch(before, after)
    assert "phase" not in patch
    assert patch["conditions"][0] == {**accepted, "message": ""}
    ready = patch["conditions"][1]
    assert ready["type"] == "ReportReady" and ready["status"] == "True" and ready["observedGeneration"] == 3
    assert ready["reason"] == "ReportWritten"
    # the verdict is the session's message (the operator's): the summary does not repeat it
    assert patch["summary"] == {"slowestRank": 2, "slowRanks": [], "hungRanks": [], "erroredRanks": []}
    assert patch["reportURL"] == "s3://b/r.html" and patch["reportJSONURL"] == "s3://b/r.json"
    ProfileSessionStatus.model_validate(patch)


def test_transition_time_changes_only_with_the_status() -> None:
    old = {"type": "ReportReady", "status": "True", "reason": "ReportWritten", "lastTransitionTime": T0}
    same = _status([old])
    apply_outcome(same, AnalysisOutcome(ok=True, message="again", report_url="s3://b/again.html"), now=NOW)
    assert len(same.conditions) == 1 and same.conditions[0].last_transition_time.year == 2026
    # the verdict is the session's message: ReportReady says where the report is
    assert same.conditions[0].last_transition_time.month == 1
    assert same.conditions[0].message == "report.html: s3://b/again.html"
    flipped = _status([old])
    apply_outcome(flipped, AnalysisOutcome(ok=False, message="boom"), now=NOW)
    c = flipped.conditions[0]
    assert c.status is ConditionStatus.FALSE and c.reason == "AnalysisFailed" and c.last_transition_time == NOW
    assert c.message == ""  # why it failed is the session's message, told once
    assert flipped.summary is None and flipped.report_url is None  # a failure leaves no report fields


def test_regressed_is_set_beside_report_ready() -> None:
    finished = {"type": "Finished", "status": "False", "reason": "Running", "lastTransitionTime": T0}
    status = _status([finished])
    gate = RegressedVerdict(status=ConditionStatus.TRUE, reason="Regressed", message="steps are 40% slower")
    apply_outcome(status, AnalysisOutcome(ok=True, message="fine", regressed=gate), now=NOW, generation=3)
    by_type = {c.type.value: c for c in status.conditions}
    assert set(by_type) == {"Finished", "ReportReady", "Regressed"}
    assert by_type["Regressed"].status is ConditionStatus.TRUE and by_type["Regressed"].reason == "Regressed"
    assert by_type["Regressed"].message == "steps are 40% slower" and by_type["Regressed"].observed_generation == 3


def test_one_message_cap_for_every_condition() -> None:
    status = _status([])
    long = "x" * 40_000
    gate = RegressedVerdict(status=ConditionStatus.UNKNOWN, reason="BaselineNotFound", message=long)
    url = "s3://b/" + "r" * 40_000
    apply_outcome(status, AnalysisOutcome(ok=True, message=long, report_url=url, regressed=gate), now=NOW)
    assert [len(c.message) for c in status.conditions] == [MAX_MESSAGE, MAX_MESSAGE]
