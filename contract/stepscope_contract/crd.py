"""The ProfileSession CRD, generated from the pydantic models so that the two cannot disagree.

pydantic's JSON Schema is turned into a Kubernetes *structural* openAPIV3Schema: references inlined,
`Optional[X]` as a plain optional X, no `additionalProperties: false` beside `properties`, no titles.
"""

from typing import Any

import yaml
from pydantic import BaseModel

from stepscope_contract.constants import (
    CATEGORY,
    CRD_NAME,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAME,
    SINGULAR,
    VERSION,
)
from stepscope_contract.crd_rules import RULES, CelRule
from stepscope_contract.session import NO_BASELINE, ProfileSessionSpec, ProfileSessionStatus

_DROP = {"title", "examples"}


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(branches) == 1:
            merged = {**_resolve(branches[0], defs), **rest}
            if merged.get("default", ...) is None:
                merged.pop("default")
            return _resolve(merged, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "additionalProperties" and value is False:
            continue  # structural schemas prune unknown fields; `false` beside properties is invalid
        if key == "default" and value is None:
            continue
        if key == "properties":
            out[key] = {name: _resolve(sub, defs) for name, sub in value.items()}
        else:
            out[key] = _resolve(value, defs)
    return out


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    schema = _resolve(raw, defs)
    assert isinstance(schema, dict)
    return schema


def with_rules(spec_schema: dict[str, Any], rules: tuple[CelRule, ...] = RULES) -> dict[str, Any]:
    """Place each CEL rule at its path under `spec` (taking over the schema keywords it replaces)."""
    for rule in rules:
        node = spec_schema
        for name in rule.path:
            node = node["properties"][name]
        for keyword in rule.replaces:
            node.pop(keyword, None)
        node.setdefault("x-kubernetes-validations", []).append(rule.wire())
    return spec_schema


def status_schema() -> dict[str, Any]:
    schema = structural_schema(ProfileSessionStatus)
    # kopf may keep bookkeeping under status.kopf; it is opaque to stepscope.
    schema["properties"]["kopf"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return schema


def printer_columns() -> list[dict[str, Any]]:
    return [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {
            "name": "Captured",
            "type": "string",
            "jsonPath": ".status.progress",
            "description": "targets captured / total; after a hang or desync, the culprit and how many wait for it",
        },
        {
            "name": "Slowest",
            "type": "string",
            "jsonPath": ".status.summary.slowestRank",
            "description": "the rank that slows the job (the culprit), empty when balanced",
        },
        {
            "name": "Cause",
            "type": "string",
            "jsonPath": ".status.summary.cause",
            "description": "why it is slow: compute, host, memory, communication, hang, desync or a finding's cause",
        },
        {
            "name": "Bottleneck",
            "type": "string",
            "jsonPath": ".status.summary.topBottleneck",
            "description": "what the slowest rank runs in its excess, or where a hung rank is stuck (no slow rank: the "
            "top function by bottleneck ratio)",
        },
        {
            "name": "Gate",
            "type": "string",
            "jsonPath": ".status.summary.gateResult",
            "description": f"against spec.baseline: Passed, Improved, Regressed or Undecided; {NO_BASELINE} without a "
            "baseline",
        },
        {
            "name": "Vs Baseline",
            "type": "string",
            "jsonPath": ".status.summary.gateFigure",
            "description": "the figure that decided the gate (what cleared it, else the steps' change)",
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Report", "type": "string", "jsonPath": ".status.reportURL", "priority": 1},
    ]


def crd_document(
    *,
    kinds: tuple[str, str, str, str],
    description: str,
    spec_schema: dict[str, Any],
    status_schema: dict[str, Any],
    columns: list[dict[str, Any]],
) -> dict[str, Any]:
    """A namespaced CRD of the stepscope group; `kinds` = (kind, plural, singular, short name)."""
    kind, plural, singular, short_name = kinds
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "stepscope"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": [short_name],
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def render_yaml(crd: dict[str, Any]) -> str:
    header = "# Generated from stepscope_contract by `make crds`; do not edit by hand.\n"
    return header + yaml.safe_dump(crd, sort_keys=False, width=120)


def build_crd() -> dict[str, Any]:
    crd = crd_document(
        kinds=(KIND, PLURAL, SINGULAR, SHORT_NAME),
        description="A profiling campaign over the ranks of a distributed PyTorch job.",
        spec_schema=with_rules(structural_schema(ProfileSessionSpec)),
        status_schema=status_schema(),
        columns=printer_columns(),
    )
    assert crd["metadata"]["name"] == CRD_NAME
    return crd


def render_crd_yaml() -> str:
    return render_yaml(build_crd())
