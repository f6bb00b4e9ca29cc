"""The ProfileTrigger CRD, generated from the pydantic models the same way as the session's (`crd.py`)."""

from __future__ import annotations

from typing import Any

from stepscope_contract.constants import (
    TRIGGER_CRD_NAME,
    TRIGGER_KIND,
    TRIGGER_PLURAL,
    TRIGGER_SHORT_NAME,
    TRIGGER_SINGULAR,
)
from stepscope_contract.crd import crd_document, render_yaml, structural_schema, with_rules
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
    crd = crd_document(
        kinds=(TRIGGER_KIND, TRIGGER_PLURAL, TRIGGER_SINGULAR, TRIGGER_SHORT_NAME),
        description="Creates ProfileSessions by itself when a job's step telemetry shows a regression, a straggler "
        "or a stall, or on a schedule.",
        spec_schema=with_rules(structural_schema(ProfileTriggerSpec), TRIGGER_RULES),
        status_schema=trigger_status_schema(),
        columns=trigger_printer_columns(),
    )
    assert crd["metadata"]["name"] == TRIGGER_CRD_NAME
    return crd


def render_trigger_crd_yaml() -> str:
    return render_yaml(build_trigger_crd())
