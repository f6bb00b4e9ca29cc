"""The in-cluster regression gate: find a session's baseline (spec.baseline), and turn the diff into what the session
carries: the report's "vs baseline" section, the status summary's gate fields and the Regressed condition. Pure,
except `find_baseline` and `load_baseline`, which read storage.

A baseline named by session is looked up in the sessions index of the session's own storage and namespace
(stepscope_contract.session_index), so it may have been deleted since; a baseline URI, or the report an index entry
points at, must lie inside the session's own namespace folder, `<storage.uri>/<namespace>/`: the analyzer reads it
with the session's credentials, which reach every team's folder of the bucket, so a baseline in another namespace's
folder (another team's op names), another bucket or another scheme is refused (reason BaselineRefused, with why).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from stepscope_analyzer.diff.sides import SideError, load_side
from stepscope_analyzer.diff.verdict import ADDED_WORK
from stepscope_analyzer.ranks.storage_io import StorageError, Store
from stepscope_contract.diff import DiffResult, DiffVerdict
from stepscope_contract.report import BaselineChange, Report, VsBaseline
from stepscope_contract.session import (
    GATE_RESULTS,
    MAX_SUMMARY_CHANGES,
    ConditionStatus,
    GateChange,
    ProfileSessionSpec,
    ReportSummary,
)
from stepscope_contract.session_index import MAX_INDEX_BYTES, SessionIndexEntry, session_index_key
from stepscope_contract.storage import confinement_error, namespace_location, parse_storage_uri

MAX_REPORT_CHANGES = 20
NAME_CHARS = 256


class BaselineError(Exception):
    """No baseline to compare with; `reason` is the Regressed condition's reason (CamelCase)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Baseline:
    source: str  # what the diff reads: a report.json or a session folder
    session: str | None  # its session name, when spec.baseline named one


def find_baseline(spec: ProfileSessionSpec, namespace: str, store: Store) -> Baseline:
    """Where spec.baseline's report is. `store` holds the session's storage (the sessions index is there)."""
    wanted = spec.baseline
    if wanted is None:
        raise BaselineError("NoBaseline", "the session names no baseline")
    if wanted.uri is not None:
        return Baseline(_confined(wanted.uri, spec, namespace, "spec.baseline.uri"), None)
    assert wanted.session is not None
    key = session_index_key(parse_storage_uri(spec.storage.uri), namespace, wanted.session)
    try:
        if not store.exists(key):
            raise BaselineError(
                "BaselineNotFound",
                f"no analysed session {namespace}/{wanted.session} in the sessions index ({store.uri(key)})",
            )
        entry = SessionIndexEntry.model_validate_json(store.read(key, most=MAX_INDEX_BYTES))
    except (StorageError, ValidationError, ValueError) as exc:
        raise BaselineError("BaselineUnreadable", f"the index entry {store.uri(key)}: {str(exc)[:300]}") from None
    return Baseline(_confined(entry.report_json, spec, namespace, f"the index entry {store.uri(key)}"), wanted.session)


def _confined(uri: str, spec: ProfileSessionSpec, namespace: str, what: str) -> str:
    """`uri` when it lies inside `<storage.uri>/<namespace>/`; BaselineRefused saying why otherwise."""
    folder = namespace_location(parse_storage_uri(spec.storage.uri), namespace)
    why = confinement_error(uri, folder)
    if why is not None:
        raise BaselineError(
            "BaselineRefused",
            f"{what} names {uri}: a baseline must lie in this namespace's folder {folder.uri}/ ({why})",
        )
    return uri


def load_baseline(baseline: Baseline, spec: ProfileSessionSpec) -> Report:
    """The baseline's Report, read with the session's storage settings and credentials."""
    try:
        return load_side(baseline.source, spec.storage)
    except SideError as exc:
        raise BaselineError("BaselineUnreadable", str(exc)) from None


def vs_baseline(diff: DiffResult, baseline: Baseline, diff_url: str | None) -> VsBaseline:
    """The report's "vs baseline" section."""
    return VsBaseline(
        baseline=baseline.source,
        baseline_session=baseline.session,
        verdict=diff.verdict.value,
        reason=diff.reason,
        max_regression_pct=diff.max_regression_pct,
        confidence=diff.confidence,
        regression_pct=diff.regression_pct,
        regression_ci_low_pct=diff.regression_ci_low_pct,
        regression_ci_high_pct=diff.regression_ci_high_pct,
        at_equal_op_speed=diff.at_equal_op_speed,
        step_regression_pct=diff.step_regression_pct,
        added_work_pct=diff.added_work.pct if diff.added_work else None,
        added_work_ci_low_pct=diff.added_work.ci_low_pct if diff.added_work else None,
        added_work_ci_high_pct=diff.added_work.ci_high_pct if diff.added_work else None,
        decided_by=list(diff.decided_by),
        top_changes=[
            BaselineChange(
                name=c.name,
                kind=c.kind,
                change=c.change.value,
                baseline_us_per_step=c.baseline_us_per_step,
                candidate_us_per_step=c.candidate_us_per_step,
                delta_us_per_step=c.delta_us_per_step,
                at_equal_op_speed_delta_us_per_step=c.at_equal_op_speed_delta_us_per_step,
                count_delta=c.count_delta,
                rank=c.rank,
            )
            for c in diff.top_changes[:MAX_REPORT_CHANGES]
        ],
        diff_url=diff_url,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def gate_summary(summary: ReportSummary, diff: DiffResult, baseline: Baseline) -> ReportSummary:
    """The status summary with the gate's numbers and its largest changes."""
    changes = [
        GateChange(
            name=c.name[:NAME_CHARS],
            kind=c.kind[:32],
            change=c.change.value,
            baseline_us_per_step=round(c.baseline_us_per_step, 1),
            candidate_us_per_step=round(c.candidate_us_per_step, 1),
            delta_us_per_step=round(c.delta_us_per_step, 1),
            at_equal_op_speed_delta_us_per_step=round(c.at_equal_op_speed_delta_us_per_step, 1),
            count_delta=round(c.count_delta, 2),
            rank=c.rank,
        )
        for c in diff.top_changes[:MAX_SUMMARY_CHANGES]
    ]
    work = diff.added_work
    return summary.model_copy(
        update={
            "gate": diff.verdict.value,
            "regression_percent": _round(diff.regression_pct),
            "regression_low_percent": _round(diff.regression_ci_low_pct),
            "regression_high_percent": _round(diff.regression_ci_high_pct),
            "step_regression_percent": _round(diff.step_regression_pct),
            "added_work_percent": _round(work.pct) if work else None,
            "added_work_low_percent": _round(work.ci_low_pct) if work else None,
            "added_work_high_percent": _round(work.ci_high_pct) if work else None,
            "gate_decided_by": ",".join(diff.decided_by) or None,
            "gate_result": GATE_RESULTS[diff.verdict.value],
            "gate_figure": gate_figure(diff),
            "baseline": baseline.session or baseline.source[:2048],
            "top_changes": changes,
        }
    )


def gate_figure(diff: DiffResult) -> str | None:
    """The figure that decided the gate, for the printer column: what cleared it when regressed, else the steps'
    estimate (the figure a pass or an improvement was read from)."""
    work = diff.added_work
    if diff.verdict is DiffVerdict.REGRESSED and ADDED_WORK in diff.decided_by and work is not None:
        return f"{work.pct:+.1f}% added work"
    if diff.regression_pct is None:
        return None
    steps = "steps at equal op speed" if diff.at_equal_op_speed else "steps"
    return f"{diff.regression_pct:+.1f}% {steps}"


def regressed(diff: DiffResult) -> tuple[ConditionStatus, str, str]:
    """(status, reason, message) of the Regressed condition: True when the gate failed, False when it passed (or
    the steps got faster), Unknown when the comparison could not decide. The message is the diff's reason (which
    names the top change already)."""
    message = diff.reason
    if diff.verdict is DiffVerdict.REGRESSED:
        return ConditionStatus.TRUE, "Regressed", message
    if diff.verdict is DiffVerdict.IMPROVED:
        return ConditionStatus.FALSE, "Improved", message
    if diff.verdict is DiffVerdict.PASSED:
        return ConditionStatus.FALSE, "WithinGate", message
    return ConditionStatus.UNKNOWN, "TooFewSteps", message


def index_entry(
    report: Report, *, namespace: str, name: str, uid: str, folder: str, report_json: str
) -> SessionIndexEntry:
    """This session's entry in the sessions index."""
    median = report.diagnosis.median_step_us
    return SessionIndexEntry(
        namespace=namespace,
        name=name,
        uid=uid,
        folder=folder,
        report_json=report_json,
        analysed_at=report.generated_at,
        verdict=report.diagnosis.verdict[:1024],
        median_step_ms=round(median / 1000.0, 3) if median else None,
    )
