"""spec.baseline and spec.gate (the regression gate), the terminal and gate conditions, the sessions index key."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from stepscope_contract.session import ConditionType, GateSpec, ProfileSessionSpec, same_store
from stepscope_contract.session_index import SESSIONS_DIR, session_index_key
from stepscope_contract.storage import parse_storage_uri

pytestmark = pytest.mark.unit

BASE = {"targets": {"jobRef": {"kind": "Job", "name": "train"}}, "storage": {"uri": "s3://bucket/p"}}


def test_no_baseline_by_default_and_gate_defaults() -> None:
    spec = ProfileSessionSpec.model_validate(BASE)
    assert spec.baseline is None
    assert spec.gate == GateSpec(max_regression_percent=10.0, confidence=0.90, wall_clock=False)
    assert ProfileSessionSpec.model_validate({**BASE, "gate": {"wallClock": True}}).gate.wall_clock


def test_baseline_is_a_session_or_a_uri_in_the_same_store() -> None:
    by_name = ProfileSessionSpec.model_validate({**BASE, "baseline": {"session": "train-main"}})
    assert by_name.baseline is not None and by_name.baseline.session == "train-main"
    by_uri = ProfileSessionSpec.model_validate({**BASE, "baseline": {"uri": "s3://bucket/q/report.json"}})
    assert by_uri.baseline is not None and by_uri.baseline.uri == "s3://bucket/q/report.json"
    for wrong, words in (
        ({}, "not both"),
        ({"session": "a", "uri": "s3://bucket/r"}, "not both"),
        ({"uri": "s3://other-bucket/r/report.json"}, "same store"),
        ({"uri": "file:///tmp/report.json"}, "same store"),
        ({"session": "Not_A_Name"}, "pattern"),
    ):
        with pytest.raises(ValidationError, match=words):
            ProfileSessionSpec.model_validate({**BASE, "baseline": wrong})


def test_gate_bounds() -> None:
    with pytest.raises(ValidationError):
        GateSpec.model_validate({"maxRegressionPercent": -1})
    with pytest.raises(ValidationError):
        GateSpec.model_validate({"confidence": 1.0})


def test_same_store() -> None:
    assert same_store("s3://b/x/report.json", "s3://b/y")
    assert not same_store("oss://b/x", "s3://b/x")
    assert not same_store("s3://c/x", "s3://b/x")
    assert same_store("file:///a/b", "file:///c")


def test_conditions_a_pipeline_waits_on() -> None:
    assert ConditionType.FINISHED.value == "Finished" and ConditionType.REGRESSED.value == "Regressed"


def test_index_key_is_next_to_the_namespace_folders_and_cannot_climb() -> None:
    base = parse_storage_uri("s3://bucket/sessions")
    assert session_index_key(base, "ml", "train-main") == f"sessions/ml/{SESSIONS_DIR}/train-main.json"
    sneaky = session_index_key(base, "../x", "../../y")
    assert sneaky.startswith("sessions/") and "/../" not in f"/{sneaky}/" and sneaky.count("/") == 3


def test_the_ci_example_session_is_valid() -> None:
    from pathlib import Path

    import yaml

    from stepscope_contract.crd import build_crd
    from stepscope_local.kube.validation import validation_errors

    text = (Path(__file__).resolve().parents[2] / "examples" / "ci" / "profilesession.yaml").read_text()
    doc = yaml.safe_load(text.replace("RUN_NAME", "train-ci-1234"))
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert validation_errors(schema, doc) == []
    spec = ProfileSessionSpec.model_validate(doc["spec"])
    assert spec.baseline is not None and spec.baseline.session == "train-main"
    assert spec.gate.max_regression_percent == 15
