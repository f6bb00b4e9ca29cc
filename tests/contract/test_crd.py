"""The CRD and the pydantic models agree: the committed CRD is the generated one, and a corpus of
valid and invalid sessions gets the same verdict from both (the CRD side as the API server judges it: schema plus
CEL rules), with messages that name the field and read as sentences, not schema dumps."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from stepscope_contract.crd import build_crd, render_crd_yaml
from stepscope_contract.crd_rules import IMMUTABLE_FIELDS, RULES
from stepscope_contract.errors import describe_validation_error
from stepscope_contract.session import ProfileSessionSpec
from stepscope_local.kube.cel import evaluate
from stepscope_local.kube.validation import validation_errors

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VALID = sorted(EXAMPLES.glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
CRD_FILES = [
    Path("crds/profilesessions.stepscope.dev.yaml"),
    Path("helm/stepscope/crds/profilesessions.stepscope.dev.yaml"),
]


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _crd_errors(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """What the API server says about `obj` (the emulator runs the schema and the CEL rules)."""
    return [f"{field}: {message}" for field, message in validation_errors(_schema(), obj, old)]


def _expected_field(path: Path) -> str:
    match = re.search(r"invalid: (\S+)", path.read_text())
    assert match, f"{path} must say which field is invalid in its first comment"
    return match.group(1)


@pytest.mark.parametrize("path", CRD_FILES, ids=str)
def test_committed_crd_is_generated(repo_root: Path, path: Path) -> None:
    assert (repo_root / path).read_text() == render_crd_yaml(), "run `make crds`"


def test_crd_is_a_valid_kubernetes_object(repo_root: Path) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", "--quiet", str(CRD_FILES[0])],
        cwd=repo_root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_structural_schema_rules() -> None:
    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if any(k in node for k in ("properties", "items", "enum")):
                assert "type" in node, f"{path} has no type"
            assert not ("properties" in node and node.get("additionalProperties") is False), path
            assert "$ref" not in node and "anyOf" not in node, path
            for key, value in node.items():
                if key == "oneOf":
                    for branch in value:  # structural: branches carry no types
                        assert set(branch) <= {"required"}, path
                    continue
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for item in node:
                walk(item, path)

    walk(_schema(), "$")


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_examples_pass_both(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    assert _crd_errors(obj) == []
    ProfileSessionSpec.model_validate(obj["spec"])


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_examples_fail_both_naming_the_field(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    field = _expected_field(path)
    crd_errors = _crd_errors(obj)
    assert crd_errors, f"CRD schema accepted {path.name}"
    assert any(e.startswith(field) for e in crd_errors), crd_errors
    with pytest.raises(ValidationError) as info:
        ProfileSessionSpec.model_validate(obj["spec"])
    assert field in describe_validation_error(info.value)


def test_messages_are_sentences_not_schema_dumps() -> None:
    for path in INVALID:
        for message in _crd_errors(yaml.safe_load(path.read_text())):
            assert "is valid under each of" not in message and "{'" not in message, (path.name, message)
            assert "Invalid value" in message or "Required value" in message or "Unsupported value" in message


def test_every_rule_compiles_and_has_a_message() -> None:
    for rule in RULES:
        _, error = evaluate(rule.rule, {}, {} if rule.transition else ...)
        assert error is None or "compilation" not in error, (rule.rule, error)
        assert rule.message or rule.message_expression, rule.rule


def test_cross_field_rules_give_their_message() -> None:
    base = yaml.safe_load((EXAMPLES / "profilesession-minimal.yaml").read_text())
    both = {
        **base,
        "spec": {**base["spec"], "targets": {**base["spec"]["targets"], "jobRef": {"kind": "Job", "name": "j"}}},
    }
    assert _crd_errors(both) == [
        'spec.targets: Invalid value: "object": set targets.selector or targets.jobRef, not both'
    ]
    ranks = {**base, "spec": {**base["spec"], "targets": {**base["spec"]["targets"], "ranks": "0-3,x"}}}
    (message,) = _crd_errors(ranks)
    assert message.startswith("spec.targets.ranks:") and '"0-3,x" is not a rank list' in message
    local = {**base, "spec": {**base["spec"], "storage": {"uri": "file:///t", "credentialsSecret": {"name": "s"}}}}
    (message,) = _crd_errors(local)
    assert "storage.credentialsSecret only applies to s3:// and oss:// URIs, not to file:///t" in message
    neither = {**base, "spec": {**base["spec"], "baseline": {}}}
    assert _crd_errors(neither) == [
        'spec.baseline: Invalid value: "object": set one of baseline.session (a previous session of this namespace) '
        "or baseline.uri (a stored report)"
    ]
    bad_uri = {**base, "spec": {**base["spec"], "baseline": {"uri": "http://x/report.json"}}}
    (message,) = _crd_errors(bad_uri)
    assert message.startswith("spec.baseline.uri:") and '"http://x/report.json" is not a storage URI' in message


EDITS = {
    "targets": ("maxTargets", 8),
    "capture": ("steps", 11),
    "storage": ("uri", "s3://other/x"),
    "analysis": ("shards", 3),
    "baseline": ("session", "train-other"),
    "gate": ("maxRegressionPercent", 30),
}


@pytest.mark.parametrize("field", IMMUTABLE_FIELDS)
def test_frozen_fields_cannot_change(field: str) -> None:
    old = yaml.safe_load((EXAMPLES / "profilesession-full.yaml").read_text())
    new = yaml.safe_load((EXAMPLES / "profilesession-full.yaml").read_text())
    key, value = EDITS[field]
    new["spec"][field][key] = value
    assert _crd_errors(new) == []  # valid on its own ...
    assert _crd_errors(new, old) == [  # ... but not as an edit
        f'spec.{field}: Invalid value: "object": spec.{field} cannot change once the session exists; '
        "create a new ProfileSession instead"
    ]
    new["spec"] = {**old["spec"], "ttlSecondsAfterFinished": 60}
    assert _crd_errors(new, old) == []  # the analyzer Job's TTL may still change
