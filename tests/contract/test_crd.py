"""The CRD and the pydantic models agree: the committed CRD is the generated one, and a corpus of
valid and invalid sessions gets the same verdict from both, with messages that name the field."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from stepscope_contract.crd import build_crd, render_crd_yaml
from stepscope_contract.errors import describe_validation_error
from stepscope_contract.session import ProfileSessionSpec

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


def _crd_errors(obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_schema())
    out = []
    for err in validator.iter_errors(obj):
        path = [str(p) for p in err.absolute_path]
        if err.validator == "required":  # name the missing field itself, as the apiserver does
            path.append(re.sub(r"^'(.*)' is a required property$", r"\1", err.message))
        out.append(".".join(path) + ": " + err.message)
    return out


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
