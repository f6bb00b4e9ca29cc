"""The ProfileTrigger CRD and its pydantic models agree: the committed CRDs are the generated ones, the examples under
examples/triggers pass both, the invalid ones fail both naming the field, every CEL rule compiles and gives its
message; the cron schedule is checked for its syntax and its ranges; a trigger's targets and template storage follow
the session's own rules."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from stepscope_contract.errors import describe_validation_error
from stepscope_contract.step_telemetry import RankSteps
from stepscope_contract.trigger import ProfileTriggerSpec, StragglerMeasure
from stepscope_contract.trigger_crd import build_trigger_crd, render_trigger_crd_yaml
from stepscope_contract.trigger_rules import TRIGGER_RULES
from stepscope_local.kube.cel import evaluate
from stepscope_local.kube.validation import validation_errors

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "triggers"
VALID = sorted(EXAMPLES.glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
CRD_FILES = [
    Path("crds/profiletriggers.stepscope.dev.yaml"),
    Path("helm/stepscope/crds/profiletriggers.stepscope.dev.yaml"),
]


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_trigger_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _crd_errors(obj: dict[str, Any]) -> list[str]:
    return [f"{field}: {message}" for field, message in validation_errors(_schema(), obj)]


@pytest.mark.parametrize("path", CRD_FILES, ids=str)
def test_committed_crd_is_generated(path: Path) -> None:
    assert (REPO / path).read_text() == render_trigger_crd_yaml(), "run `make crds`"


def test_crd_is_a_valid_kubernetes_object() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", "--quiet", str(CRD_FILES[0])],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_printer_columns_show_condition_last_fired_and_sessions() -> None:
    columns = build_trigger_crd()["spec"]["versions"][0]["additionalPrinterColumns"]
    shown = [(c["name"], c["jsonPath"]) for c in columns if not c.get("priority")]
    assert shown == [
        ("Condition", ".status.condition"),
        ("Last Fired", ".status.lastFiredTime"),
        ("Sessions", ".status.sessionCount"),
        ("Age", ".metadata.creationTimestamp"),
    ]


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_examples_pass_both(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    assert _crd_errors(obj) == []
    ProfileTriggerSpec.model_validate(obj["spec"])


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_examples_fail_both_naming_the_field(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    match = re.search(r"invalid: (\S+)", path.read_text())
    assert match, f"{path} must say which field is invalid in its first comment"
    field = match.group(1)
    errors = _crd_errors(obj)
    assert any(e.startswith(f"{field}:") for e in errors), errors
    assert all("{'" not in e for e in errors), errors  # sentences, not schema dumps
    with pytest.raises(ValidationError) as info:
        ProfileTriggerSpec.model_validate(obj["spec"])
    described = describe_validation_error(info.value)
    assert field in described or field == "spec", described


def test_every_rule_compiles_and_has_a_message() -> None:
    for rule in TRIGGER_RULES:
        _, error = evaluate(rule.rule, {}, ...)
        assert error is None or "compilation" not in error, (rule.rule, error)
        assert rule.message or rule.message_expression, rule.rule


def _minimal() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "profiletrigger.yaml").read_text())


def test_schedule_syntax_and_ranges() -> None:
    obj = _minimal()
    obj["spec"]["schedule"] = "*/15 2-4 * * 1,3,5"
    assert _crd_errors(obj) == []
    ProfileTriggerSpec.model_validate(obj["spec"])
    obj["spec"]["schedule"] = "0 3 * *"
    (message,) = _crd_errors(obj)
    assert message.startswith("spec.schedule:") and "is not a cron schedule" in message
    obj["spec"]["schedule"] = "61 3 * * *"
    with pytest.raises(ValidationError) as info:
        ProfileTriggerSpec.model_validate(obj["spec"])
    assert "spec.schedule: schedule: minute 61 is outside 0-59" in describe_validation_error(info.value)


def test_schedule_alone_is_enough_and_defaults_are_the_documented_ones() -> None:
    spec = ProfileTriggerSpec.model_validate(
        {
            "targets": {"selector": {"matchLabels": {"app": "t"}}},
            "schedule": "0 3 * * *",
            "sessionTemplate": {"spec": {"storage": {"uri": "s3://bucket/p"}}},
        }
    )
    assert not spec.conditions.any()
    assert (spec.cooldown_seconds, spec.max_sessions_per_day, spec.evaluation_interval_seconds) == (1800, 10, 30)
    assert (spec.successful_sessions_history_limit, spec.failed_sessions_history_limit) == (3, 1)
    straggler = ProfileTriggerSpec.model_validate(_minimal()["spec"]).conditions.straggler
    assert straggler is not None and straggler.measure is StragglerMeasure.OWN_TIME


def test_own_time_is_the_step_outside_backward() -> None:
    steps = RankSteps(rank=0, duration_ms=[100.0, 50.0], backward_ms=[30.0, 60.0])
    assert steps.own_ms() == [70.0, 0.0]


def test_readme_sample_trigger_is_valid() -> None:
    readme = (REPO / "README.md").read_text()
    samples = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "kind: ProfileTrigger" in b]
    assert samples, "the README shows a ProfileTrigger"
    for sample in samples:
        obj = yaml.safe_load(sample)
        assert _crd_errors(obj) == []
        ProfileTriggerSpec.model_validate(obj["spec"])
