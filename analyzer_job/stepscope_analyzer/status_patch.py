"""The status merge patch the analyzer writes to its ProfileSession. Pure.

The analyzer owns status.summary, status.reportURL, status.reportJSONURL and the ReportReady condition; the
other conditions are kept as they are (read-modify-write: a merge patch replaces the whole list).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from stepscope_contract.session import Condition, ConditionStatus, ConditionType, ReportSummary


def upsert_condition(conditions: list[dict[str, Any]], new: Condition) -> list[dict[str, Any]]:
    """Replace the condition of new.type (keeping its lastTransitionTime when the status did not change)."""
    wire = new.wire()
    out: list[dict[str, Any]] = []
    replaced = False
    for c in conditions:
        if c.get("type") == new.type.value:
            if c.get("status") == new.status.value and c.get("lastTransitionTime"):
                wire["lastTransitionTime"] = c["lastTransitionTime"]
            out.append(wire)
            replaced = True
        else:
            out.append(c)
    if not replaced:
        out.append(wire)
    return out


def report_ready_condition(ok: bool, message: str, generation: int | None, now: datetime | None = None) -> Condition:
    return Condition(
        type=ConditionType.REPORT_READY,
        status=ConditionStatus.TRUE if ok else ConditionStatus.FALSE,
        reason="ReportWritten" if ok else "AnalysisFailed",
        message=message[:32_000],
        last_transition_time=now or datetime.now(UTC).replace(microsecond=0),
        observed_generation=generation,
    )


def status_patch(
    current: dict[str, Any],
    *,
    ok: bool,
    message: str,
    summary: ReportSummary | None = None,
    report_url: str | None = None,
    report_json_url: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Merge patch for the status subresource of `current` (the whole object as read)."""
    metadata = current.get("metadata") or {}
    conditions = list((current.get("status") or {}).get("conditions") or [])
    generation = metadata.get("generation")
    condition = report_ready_condition(ok, message, generation if isinstance(generation, int) else None, now)
    status: dict[str, Any] = {"conditions": upsert_condition(conditions, condition)}
    if summary is not None:
        status["summary"] = summary.wire()
    if report_url is not None:
        status["reportURL"] = report_url
    if report_json_url is not None:
        status["reportJSONURL"] = report_json_url
    patch: dict[str, Any] = {"status": status}
    if metadata.get("resourceVersion"):
        patch["metadata"] = {"resourceVersion": metadata["resourceVersion"]}  # conflict instead of lost update
    return patch
