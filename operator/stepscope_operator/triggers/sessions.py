"""The ProfileSession a trigger creates when it fires: pure builders.

The session's spec is the trigger's targets plus its template's capture, storage, analysis and TTL; a stall's session
asks the hooks to declare the hang at once (its stepTimeoutSeconds is at most the stall's seconds, which already
passed without a step), so it brings back every rank's stacks and Flight Recorder dump. The session is owned by the
trigger (deleted with it), labelled with the trigger's name and annotated with what fired and why. Names are
`<trigger>-<n>` with n the trigger's session count: a retry after a crash between create and status patch names the
same session, which then already exists (409) and is adopted.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from stepscope_contract.constants import (
    API_VERSION,
    KIND,
    TRIGGER_CONDITION_ANNOTATION,
    TRIGGER_KIND,
    TRIGGER_LABEL,
    TRIGGER_REASON_ANNOTATION,
)
from stepscope_contract.session import ProfileSessionSpec
from stepscope_contract.trigger import ProfileTriggerSpec, TriggerCondition
from stepscope_operator.triggers.conditions import Finding

MAX_SESSION_NAME = 52  # the analyzer's Job names add "-analyze-map" and stay within 63 characters
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def trigger_label(name: str) -> str:
    """The trigger's name as a label value (names longer than a label allows keep a prefix and a hash)."""
    if LABEL_VALUE.match(name):
        return name
    return f"{name[:56].rstrip('-.')}-{_short_hash(name)}"


def session_name(trigger: str, count: int) -> str:
    suffix = f"-{count}"
    if len(trigger) + len(suffix) <= MAX_SESSION_NAME:
        return f"{trigger}{suffix}"
    room = MAX_SESSION_NAME - len(suffix) - 7
    return f"{trigger[:room].rstrip('-.')}-{_short_hash(trigger)}{suffix}"


def session_spec(spec: ProfileTriggerSpec, finding: Finding) -> ProfileSessionSpec:
    template = spec.session_template.spec
    capture = template.capture
    if finding.condition is TriggerCondition.STALL and spec.conditions.stall is not None:
        timeout = min(capture.step_timeout_seconds, spec.conditions.stall.seconds)
        capture = capture.model_copy(update={"step_timeout_seconds": timeout})
    return ProfileSessionSpec(
        targets=spec.targets,
        capture=capture,
        storage=template.storage,
        analysis=template.analysis,
        ttl_seconds_after_finished=template.ttl_seconds_after_finished,
    )


def build_session(trigger: dict[str, Any], spec: ProfileTriggerSpec, finding: Finding, count: int) -> dict[str, Any]:
    """The ProfileSession object to create for `finding` as the trigger's `count`-th session."""
    meta = trigger.get("metadata") or {}
    name = str(meta.get("name", ""))
    template_meta = spec.session_template.metadata
    labels = {**((template_meta.labels if template_meta else None) or {}), TRIGGER_LABEL: trigger_label(name)}
    annotations = {
        **((template_meta.annotations if template_meta else None) or {}),
        TRIGGER_CONDITION_ANNOTATION: finding.condition.value,
        TRIGGER_REASON_ANNOTATION: finding.message[:1024],
    }
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": session_name(name, count),
            "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": TRIGGER_KIND,
                    "name": name,
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": session_spec(spec, finding).wire(),
    }


def owned_by(session: dict[str, Any], trigger_uid: str) -> bool:
    refs = (session.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == trigger_uid and r.get("kind") == TRIGGER_KIND for r in refs)
