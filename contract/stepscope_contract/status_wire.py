"""ProfileSessionStatus to and from its wire form, and the one place its conditions and the analysis' fields are
set. Pure.

The operator is the only writer of a session's status. It reads the status typed (a field that does not validate is
dropped, never the whole status), changes it through `set_condition` and `apply_outcome` (what the analyzer Job
handed back, stepscope_contract.analysis_documents), and writes only the merge patch of the fields that changed,
built from the model: a key can only be one the CRD knows, so nothing is silently pruned by the API server. Every
message written to a status (status.message, every condition's) is cut at MAX_MESSAGE. A patch never carries NaN
or Infinity (stepscope_contract.finite).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from stepscope_contract.analysis_documents import AnalysisOutcome
from stepscope_contract.finite import finite_wire
from stepscope_contract.session import Condition, ConditionStatus, ConditionType, ProfileSessionStatus

MAX_MESSAGE = 4000
"""status.message and every condition's message are cut here (the CRD allows 4096 and 32768 characters)"""


def read_status(raw: Any) -> ProfileSessionStatus:
    """The status as read from the object, typed; fields that do not validate are left out."""
    data = dict(raw) if isinstance(raw, Mapping) else {}
    while True:
        try:
            return ProfileSessionStatus.model_validate(data)
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} & data.keys()
            if not bad:
                return ProfileSessionStatus()
            for key in bad:
                data.pop(key)


def status_patch(before: ProfileSessionStatus, after: ProfileSessionStatus) -> dict[str, Any]:
    """The merge patch that turns `before` into `after`: the wire form of every field that changed (null: removed;
    unset optional fields inside a value are left out, as the CRD's schema wants)."""
    patch: dict[str, Any] = {}
    for name, info in ProfileSessionStatus.model_fields.items():
        value = getattr(after, name)
        if value == getattr(before, name):
            continue
        key = info.alias or name
        wire = after.model_dump(mode="json", by_alias=True, include={name}, exclude_none=True)
        patch[key] = finite_wire(wire.get(key))
    return patch


def condition(conditions: Iterable[Condition], type_: ConditionType) -> Condition | None:
    return next((c for c in conditions if c.type is type_), None)


def set_condition(
    conditions: Sequence[Condition],
    type_: ConditionType,
    status: bool | ConditionStatus | None,
    *,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None = None,
) -> list[Condition]:
    """Return conditions with `type_` set (None: Unknown); lastTransitionTime changes only when the status value
    changes."""
    if isinstance(status, ConditionStatus):
        value = status
    else:
        value = ConditionStatus.UNKNOWN if status is None else ConditionStatus.TRUE if status else ConditionStatus.FALSE
    old = condition(conditions, type_)
    new = Condition(
        type=type_,
        status=value,
        reason=reason,
        message=message[:MAX_MESSAGE],
        last_transition_time=old.last_transition_time if old is not None and old.status is value else now,
        observed_generation=generation,
    )
    out = [new if c is old else c for c in conditions]
    return out if old is not None else [*out, new]


def apply_outcome(
    status: ProfileSessionStatus, outcome: AnalysisOutcome, *, now: datetime, generation: int | None = None
) -> None:
    """Set what an analysis concluded on `status`: ReportReady (ReportWritten with where the report is, or
    AnalysisFailed), the Regressed condition of a gated session, the summary and the report's URLs (only those it
    has). The verdict, or why the analysis failed, is the session's message (the caller's), told once: neither
    ReportReady nor the summary repeats it."""
    reason = "ReportWritten" if outcome.ok else "AnalysisFailed"
    message = f"report.html: {outcome.report_url}" if outcome.ok and outcome.report_url else ""
    status.conditions = set_condition(
        status.conditions, ConditionType.REPORT_READY, outcome.ok, reason=reason, message=message, now=now,
        generation=generation,
    )  # fmt: skip
    gate = outcome.regressed
    if gate is not None:
        status.conditions = set_condition(
            status.conditions, ConditionType.REGRESSED, gate.status, reason=gate.reason, message=gate.message,
            now=now, generation=generation,
        )  # fmt: skip
    if outcome.summary is not None:
        status.summary = outcome.summary.model_copy(update={"verdict": None})
    if outcome.report_url is not None:
        status.report_url = outcome.report_url
    if outcome.report_json_url is not None:
        status.report_json_url = outcome.report_json_url
