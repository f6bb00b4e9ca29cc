"""Selectors, patches, JSONPath and validation messages: the pure parts of the emulator."""

from __future__ import annotations

import pytest

from stepscope_local.kube.errors import ApiError
from stepscope_local.kube.patching import apply_patch, json_patch, merge_patch
from stepscope_local.kube.selectors import parse_field_selector, parse_label_selector
from stepscope_local.kube.table import human_duration, jsonpath

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=x", {"app": "x"}, True),
        ("app==x", {"app": "y"}, False),
        ("app!=x", {"app": "y"}, True),
        ("app!=x", {}, True),
        ("app in (x, y),tier", {"app": "y", "tier": "1"}, True),
        ("app in (x, y),tier", {"app": "y"}, False),
        ("app notin (x,y)", {"app": "z"}, True),
        ("app notin (x,y)", {"app": "x"}, False),
        ("!gone", {"app": "x"}, True),
        ("!gone", {"gone": ""}, False),
        ("app", {}, False),
        ("", {}, True),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector)(labels) is expected


def test_bad_label_selector_is_a_400() -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector("a in x")
    assert info.value.code == 400


def test_field_selector_on_metadata_and_nested_paths() -> None:
    obj = {"metadata": {"name": "p", "namespace": "ns"}, "status": {"phase": "Running"}}
    assert parse_field_selector("metadata.name=p,metadata.namespace=ns")(obj)
    assert not parse_field_selector("metadata.name=q")(obj)
    assert parse_field_selector("status.phase!=Pending")(obj)


def test_merge_patch_deletes_with_null_and_replaces_lists() -> None:
    out = merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]})
    assert out == {"a": {"c": 2}, "l": [3]}


def test_json_patch_ops_and_failing_test_is_422() -> None:
    doc = {"metadata": {"resourceVersion": "5", "finalizers": ["a"]}}
    out = json_patch(
        doc,
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ],
    )
    assert out["metadata"]["finalizers"] == ["b"]
    assert doc["metadata"]["finalizers"] == ["a"]  # the input is untouched
    with pytest.raises(ApiError) as info:
        json_patch(doc, [{"op": "test", "path": "/metadata/resourceVersion", "value": "4"}])
    assert info.value.code == 422


def test_strategic_merge_is_treated_as_merge_and_unknown_types_are_415() -> None:
    assert apply_patch({"a": 1}, "application/strategic-merge-patch+json", {"b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(ApiError) as info:
        apply_patch({}, "text/plain", {})
    assert info.value.code == 415


def test_jsonpath_forms() -> None:
    obj = {"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}}
    assert jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == "True"
    assert jsonpath(obj, ".status.conditions[0].type") == "A"
    assert jsonpath(obj, "{.status.missing}") is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(5, "5s"), (125, "2m5s"), (900, "15m"), (4 * 3600, "4h"), (3 * 86400, "3d")]
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text
