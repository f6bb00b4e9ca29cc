"""The analyzer Job's gate step: after the report is built, compare it with spec.baseline (diff.baseline), write
report/diff.json, diff.html, diff.md and diff-junit.xml next to the report (their links under spec.storage.urlBase
when set, else the storage URIs), and hand back what goes into the report, the status
summary and the Regressed condition. Also writes the session's entry in the sessions index, so later sessions can
name this one as their baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stepscope_analyzer.diff.baseline import (
    Baseline,
    BaselineError,
    find_baseline,
    gate_summary,
    index_entry,
    load_baseline,
    regressed,
    vs_baseline,
)
from stepscope_analyzer.diff.compare import DiffConfig, diff_reports
from stepscope_analyzer.diff.page import diff_html_bytes
from stepscope_analyzer.diff.pr_summary import junit, markdown
from stepscope_analyzer.ranks.storage_io import StorageError, Store
from stepscope_analyzer.report import model_json_bytes
from stepscope_contract.constants import DIFF_HTML, DIFF_JSON, DIFF_JUNIT, DIFF_MD
from stepscope_contract.diff import DiffResult
from stepscope_contract.report import Report
from stepscope_contract.session import (
    GATE_RESULTS,
    NO_BASELINE,
    ConditionStatus,
    ProfileSessionSpec,
    ReportSummary,
)
from stepscope_contract.session_folder import link_url
from stepscope_contract.session_index import session_index_key
from stepscope_contract.storage import REPORT_HTML, StorageLocation, parse_storage_uri

Log = Callable[[str], None]


@dataclass
class GateOutcome:
    """The gate's result: `condition` is (status, reason, message) of Regressed."""

    condition: tuple[ConditionStatus, str, str]
    diff: DiffResult | None = None
    baseline: Baseline | None = None
    diff_url: str | None = None

    def into_report(self, report: Report) -> Report:
        if self.diff is None or self.baseline is None:
            return report
        return report.model_copy(update={"vs_baseline": vs_baseline(self.diff, self.baseline, self.diff_url)})

    def into_summary(self, summary: ReportSummary) -> ReportSummary:
        if self.diff is None or self.baseline is None:
            return summary.model_copy(update={"gate": "unusable", "gate_result": GATE_RESULTS["unusable"]})
        return gate_summary(summary, self.diff, self.baseline)


def without_gate(summary: ReportSummary) -> ReportSummary:
    """The summary of a session that names no baseline: its Gate column says so."""
    return summary.model_copy(update={"gate_result": NO_BASELINE})


def run_gate(
    spec: ProfileSessionSpec, namespace: str, store: Store, report_dir: StorageLocation, report: Report, *, log: Log
) -> GateOutcome | None:
    """None when the session names no baseline; otherwise the comparison (or why there is none)."""
    if spec.baseline is None:
        return None
    try:
        baseline = find_baseline(spec, namespace, store)
        log(f"baseline: {baseline.source}")
        base_report = load_baseline(baseline, spec)
    except BaselineError as exc:
        log(f"no comparison: {exc}")
        return GateOutcome((ConditionStatus.UNKNOWN, exc.reason, str(exc)))
    config = DiffConfig(
        max_regression_pct=spec.gate.max_regression_percent,
        confidence=spec.gate.confidence,
        wall_clock=spec.gate.wall_clock,
    )
    diff = diff_reports(base_report, report, config, baseline_source=baseline.source, candidate_source=report_dir.uri)
    store.write(report_dir.key(DIFF_JSON), model_json_bytes(diff), "application/json")
    stored = store.write(report_dir.key(DIFF_HTML), diff_html_bytes(diff), "text/html; charset=utf-8")
    diff_url = link_url(stored, spec.storage)
    report_url = link_url(store.uri(report_dir.key(REPORT_HTML)), spec.storage)
    summary = markdown(diff, diff_url=diff_url, report_url=report_url)
    store.write(report_dir.key(DIFF_MD), summary.encode(), "text/markdown; charset=utf-8")
    junit_xml = junit(diff, diff_url=diff_url, report_url=report_url)
    store.write(report_dir.key(DIFF_JUNIT), junit_xml.encode(), "application/xml")
    log(f"gate {diff.verdict.value}: {diff.reason}")
    return GateOutcome(regressed(diff), diff, baseline, diff_url)


def write_index_entry(
    spec: ProfileSessionSpec,
    report: Report,
    store: Store,
    *,
    namespace: str,
    name: str,
    uid: str,
    folder: StorageLocation,
    report_json: str,
    log: Log,
) -> None:
    """This session's entry in the sessions index; a failure is logged, never fatal (the report is written)."""
    key = session_index_key(parse_storage_uri(spec.storage.uri), namespace, name)
    entry = index_entry(report, namespace=namespace, name=name, uid=uid, folder=folder.uri, report_json=report_json)
    try:
        store.write(key, entry.model_dump_json(indent=1).encode(), "application/json")
    except StorageError as exc:
        log(f"could not write the sessions index entry {key}: {exc}")
