"""diff.json's contract: the fields a pipeline reads (verdict, regression_pct and its interval, top_changes with
their six promised keys), closed models, and the verdicts and change classes as documented."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from stepscope_contract.constants import DIFF_HTML, DIFF_JSON
from stepscope_contract.diff import (
    ChangeKind,
    DiffResult,
    DiffVerdict,
    SideSummary,
    TopChange,
)

pytestmark = pytest.mark.unit


def _result(**extra: object) -> DiffResult:
    return DiffResult(
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        verdict=DiffVerdict.REGRESSED,
        reason="steps are 25% slower",
        max_regression_pct=15.0,
        confidence=0.9,
        regression_pct=25.0,
        regression_ci_low_pct=18.0,
        regression_ci_high_pct=31.0,
        baseline=SideSummary(source="a"),
        candidate=SideSummary(source="b"),
        top_changes=[
            TopChange(
                name="added_work",
                kind="user_annotation",
                change=ChangeKind.ADDED,
                baseline_us_per_step=0.0,
                candidate_us_per_step=5000.0,
                delta_us_per_step=5000.0,
                count_delta=1.0,
            )
        ],
        **extra,
    )


def test_the_fields_a_pipeline_reads() -> None:
    data = _result().model_dump(mode="json")
    assert data["verdict"] == "regressed"
    assert (data["regression_pct"], data["regression_ci_low_pct"], data["regression_ci_high_pct"]) == (25, 18, 31)
    change = data["top_changes"][0]
    assert set(change) >= {
        "name",
        "kind",
        "baseline_us_per_step",
        "candidate_us_per_step",
        "delta_us_per_step",
        "count_delta",
    }
    assert change["change"] == "added"
    assert data["schema_version"] == 1
    assert (DIFF_JSON, DIFF_HTML) == ("diff.json", "diff.html")


def test_verdicts_and_change_classes() -> None:
    assert [v.value for v in DiffVerdict] == ["passed", "regressed", "improved", "unusable"]
    assert [c.value for c in ChangeKind] == ["added", "removed", "changed"]


def test_models_are_closed_and_bounded() -> None:
    with pytest.raises(ValidationError):
        _result(surprise=1)
    with pytest.raises(ValidationError):
        DiffResult.model_validate({**_result().model_dump(), "confidence": 1.0})
    with pytest.raises(ValidationError):
        DiffResult.model_validate({**_result().model_dump(), "verdict": "maybe"})


def test_unusable_results_have_no_numbers() -> None:
    r = DiffResult(
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        verdict=DiffVerdict.UNUSABLE,
        reason="too few steps",
        max_regression_pct=10.0,
        confidence=0.9,
        baseline=SideSummary(),
        candidate=SideSummary(),
    )
    data = r.model_dump(mode="json")
    assert data["regression_pct"] is None and data["regression_ci_low_pct"] is None
    assert DiffResult.model_validate_json(r.model_dump_json()) == r
