"""The ProfileTrigger CRD, generated from the pydantic models the same way as the session's (`crd.py`)."""

from __future__ import annotations

from typing import Any

import yaml

from stepscope_contract.constants import (
    CATEGORY,
    GROUP,
    TRIGGER_CRD_NAME,
    TRIGGER_KIND,
    TRIGGER_PLURAL,
    TRIGGER_SHORT_NAME,
    TRIGGER_SINGULAR,
    VERSION,
)
from stepscope_contract.crd import structural_schema, with_rules
from stepscope_contract.trigger import ProfileTriggerSpec, ProfileTriggerStatus
from stepscope_contract.trigger_rules import TRIGGER_RULES


def trigger_status_schema() -> dict[str, Any]:
    schema = structural_schema(ProfileTriggerStatus)
    schema["properties"]["kopf"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return schema


def trigger_printer_columns() -> list[dict[str, Any]]:
    return [
        {
            "name": "Condition",
            "type": "string",
            "jsonPath": ".status.condition",
            "description": "the condition that held at the last evaluation",
        },
        {"name": "Last Fired", "type": "date", "jsonPath": ".status.lastFiredTime"},
        {
            "name": "Sessions",
            "type": "integer",
            "jsonPath": ".status.sessionCount",
            "description": "sessions created",
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Active", "type": "string", "jsonPath": ".status.activeSession", "priority": 1},
        {"name": "Why", "type": "string", "jsonPath": ".status.lastFiredReason", "priority": 1},
    ]


def build_trigger_crd() -> dict[str, Any]:
    spec_schema = with_rules(structural_schema(ProfileTriggerSpec), TRIGGER_RULES)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": TRIGGER_CRD_NAME, "labels": {"app.kubernetes.io/part-of": "stepscope"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": TRIGGER_KIND,
                "listKind": f"{TRIGGER_KIND}List",
                "plural": TRIGGER_PLURAL,
                "singular": TRIGGER_SINGULAR,
                "shortNames": [TRIGGER_SHORT_NAME],
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": trigger_printer_columns(),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "Creates ProfileSessions by itself when a job's step telemetry shows a "
                            "regression, a straggler or a stall, or on a schedule.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": trigger_status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }


def render_trigger_crd_yaml() -> str:
    header = "# Generated from stepscope_contract by `make crds`; do not edit by hand.\n"
    return header + yaml.safe_dump(build_trigger_crd(), sort_keys=False, width=120)
