"""The status merge patch the analyzer writes to its ProfileSession. Pure.

The analyzer owns status.summary, status.reportURL, status.reportJSONURL and the ReportReady and Regressed
conditions; the
other conditions are kept as they are (read-modify-write: a merge patch replaces the whole list). The status is
read and written through the contract's typed model (stepscope_contract.status_wire), so only fields the CRD knows
can be written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from stepscope_contract.session import Condition, ConditionStatus, ConditionType, ReportSummary
from stepscope_contract.status_wire import read_status
from stepscope_contract.status_wire import status_patch as typed_patch


def upsert_condition(conditions: list[Condition], new: Condition) -> list[Condition]:
    """Replace the condition of new.type (keeping its lastTransitionTime when the status did not change)."""
    out: list[Condition] = []
    replaced = False
    for c in conditions:
        if c.type is new.type:
            kept = c.last_transition_time if c.status is new.status else new.last_transition_time
            out.append(new.model_copy(update={"last_transition_time": kept}))
            replaced = True
        else:
            out.append(c)
    return out if replaced else [*out, new]


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
    regressed: tuple[ConditionStatus, str, str] | None = None,
) -> dict[str, Any]:
    """Merge patch for the status subresource of `current` (the whole object as read); `regressed`: the Regressed
    condition's (status, reason, message) when the session has a baseline."""
    metadata = current.get("metadata") or {}
    before = read_status(current.get("status"))
    after = before.model_copy(deep=True)
    generation = metadata.get("generation")
    condition = report_ready_condition(ok, message, generation if isinstance(generation, int) else None, now)
    after.conditions = upsert_condition(after.conditions, condition)
    if regressed is not None:
        value, reason, text = regressed
        gate = condition.model_copy(
            update={"type": ConditionType.REGRESSED, "status": value, "reason": reason, "message": text[:32_000]}
        )
        after.conditions = upsert_condition(after.conditions, gate)
    if summary is not None:
        after.summary = summary
    if report_url is not None:
        after.report_url = report_url
    if report_json_url is not None:
        after.report_json_url = report_json_url
    patch: dict[str, Any] = {"status": typed_patch(before, after)}
    if metadata.get("resourceVersion"):
        patch["metadata"] = {"resourceVersion": metadata["resourceVersion"]}  # conflict instead of lost update
    return patch
