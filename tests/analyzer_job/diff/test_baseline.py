"""The in-cluster gate's pieces on a real file:// store: the baseline found through the sessions index (or a URI),
refused outside the session's store, the comparison written next to the report, and what goes into the report,
the status summary and the Regressed condition."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_maker import noisy_job, rank, report

from stepscope_analyzer.commands.gate_step import run_gate, write_index_entry
from stepscope_analyzer.commands.session_job import with_step_numbers
from stepscope_analyzer.diff.baseline import BaselineError, find_baseline, regressed
from stepscope_analyzer.diff.compare import diff_reports
from stepscope_analyzer.ranks.storage_io import location_of, open_store
from stepscope_analyzer.report import html_bytes, model_json_bytes
from stepscope_contract.constants import DIFF_HTML, DIFF_JSON
from stepscope_contract.diff import DiffResult
from stepscope_contract.report import Cause, Report, SlowRank
from stepscope_contract.session import ConditionStatus, ProfileSessionSpec, ReportSummary
from stepscope_contract.storage import REPORT_JSON, report_location

pytestmark = pytest.mark.unit


def _spec(root: Path, **baseline: str) -> ProfileSessionSpec:
    return ProfileSessionSpec.model_validate(
        {
            "targets": {"jobRef": {"kind": "Job", "name": "t"}},
            "storage": {"uri": f"file://{root}/sessions"},
            "baseline": baseline,
            "gate": {"maxRegressionPercent": 15},
        }
    )


def _slower(source: Report, factor: float) -> Report:
    ranks = [
        rank(r.rank, [d * factor for d in r.steps.durations_us], functions={"added_work": (5000.0 * 12, 12)})
        for r in source.ranks
    ]
    return report(ranks)


def _store_baseline(root: Path, name: str, base: Report) -> str:
    """A finished session `name` in the store: its report and its index entry, as the analyzer Job leaves them."""
    spec = _spec(root, session=name)
    folder = location_of(f"file://{root}/sessions/default/{name}-abcd1234")
    store = open_store(folder)
    key = report_location(folder).key(REPORT_JSON)
    url = store.write(key, model_json_bytes(base), "application/json")
    write_index_entry(
        spec, base, store, namespace="default", name=name, uid="abcd1234", folder=folder, report_json=url, log=print
    )
    return url


def test_a_named_baseline_is_found_in_the_index_and_a_regression_fails(tmp_path: Path) -> None:
    base = noisy_job(n_steps=20, noise=0.05, seed=1)
    url = _store_baseline(tmp_path, "main", base)
    spec = _spec(tmp_path, session="main")
    folder = location_of(f"file://{tmp_path}/sessions/default/ci-1-ffff0000")
    store = open_store(folder)
    where = report_location(folder)
    candidate = _slower(noisy_job(n_steps=20, noise=0.05, seed=2), 1.6)
    gate = run_gate(spec, "default", store, where, candidate, log=print)
    assert gate is not None and gate.diff is not None and gate.baseline is not None
    assert gate.baseline.source == url and gate.baseline.session == "main"
    status, reason, message = gate.condition
    assert (status, reason) == (ConditionStatus.TRUE, "Regressed") and "added_work" in message
    written = DiffResult.model_validate_json(store.read(where.key(DIFF_JSON)))
    assert written.verdict.value == "regressed" and store.exists(where.key(DIFF_HTML))
    section = gate.into_report(candidate).vs_baseline
    assert section is not None and section.baseline_session == "main" and section.top_changes[0].name == "added_work"
    assert section.diff_url is not None and section.diff_url.endswith("/report/diff.html")
    summary = gate.into_summary(ReportSummary(verdict="v"))
    assert summary.gate == "regressed" and summary.baseline == "main"
    assert summary.regression_low_percent is not None and summary.regression_low_percent > 15
    # no ops listed on either side: the measured steps decided, and both figures say so
    assert summary.step_regression_percent == summary.regression_percent and not section.at_equal_op_speed
    assert section.step_regression_pct == section.regression_pct
    assert (
        summary.top_changes and summary.top_changes[0].name == "added_work" and summary.top_changes[0].change == "added"
    )


def test_the_same_run_passes_and_a_uri_baseline_works(tmp_path: Path) -> None:
    base = noisy_job(n_steps=20, noise=0.05, seed=1)
    url = _store_baseline(tmp_path, "main", base)
    folder = location_of(f"file://{tmp_path}/sessions/default/ci-2-ffff0000")
    gate = run_gate(
        _spec(tmp_path, uri=url), "default", open_store(folder), report_location(folder),
        noisy_job(n_steps=20, noise=0.05, seed=3), log=print,
    )  # fmt: skip
    assert gate is not None and gate.baseline is not None and gate.baseline.session is None
    assert gate.condition[:2] == (ConditionStatus.FALSE, "WithinGate")


def test_no_baseline_named_means_no_gate(tmp_path: Path) -> None:
    spec = ProfileSessionSpec.model_validate(
        {"targets": {"jobRef": {"kind": "Job", "name": "t"}}, "storage": {"uri": f"file://{tmp_path}"}}
    )
    folder = location_of(f"file://{tmp_path}/default/x-1")
    assert run_gate(spec, "default", open_store(folder), report_location(folder), noisy_job(), log=print) is None


def test_missing_or_foreign_baselines_are_unknown_with_a_reason(tmp_path: Path) -> None:
    folder = location_of(f"file://{tmp_path}/sessions/default/ci-3-ffff0000")
    store = open_store(folder)
    gate = run_gate(_spec(tmp_path, session="never-ran"), "default", store, folder, noisy_job(), log=print)
    assert gate is not None and gate.condition[:2] == (ConditionStatus.UNKNOWN, "BaselineNotFound")
    assert gate.into_report(noisy_job()).vs_baseline is None
    assert gate.into_summary(ReportSummary()).gate == "unusable"
    # an index entry (storage is writable by others) that points outside the session's store is refused
    spec = _spec(tmp_path, session="main")
    _store_baseline(tmp_path, "main", noisy_job())
    key = f"{tmp_path}/sessions/default/_sessions/main.json"
    Path(key).write_text(Path(key).read_text().replace(f"file://{tmp_path}", "s3://elsewhere"))
    with pytest.raises(BaselineError) as info:
        find_baseline(spec, "default", store)
    assert info.value.reason == "BaselineRefused"
    # an unreadable report is unknown too
    Path(key).write_text(Path(key).read_text().replace("s3://elsewhere", f"file://{tmp_path}"))
    Path(f"{tmp_path}/sessions/default/main-abcd1234/report/report.json").write_text("{not json")
    gate = run_gate(spec, "default", store, folder, noisy_job(), log=print)
    assert gate is not None and gate.condition[:2] == (ConditionStatus.UNKNOWN, "BaselineUnreadable")


def test_too_few_steps_is_unknown() -> None:
    diff = diff_reports(noisy_job(n_steps=2), noisy_job(n_steps=2))
    assert regressed(diff)[:2] == (ConditionStatus.UNKNOWN, "TooFewSteps")


def test_the_report_shows_the_comparison_escaped(tmp_path: Path) -> None:
    _store_baseline(tmp_path, "main", noisy_job(n_steps=20, noise=0.05, seed=1))
    folder = location_of(f"file://{tmp_path}/sessions/default/ci-4-ffff0000")
    candidate = _slower(noisy_job(n_steps=20, noise=0.05, seed=2), 1.6)
    evil = rank(0, candidate.ranks[0].steps.durations_us, functions={"<script>x</script>": (9e6, 12)})
    candidate = report([evil, *candidate.ranks[1:]])
    gate = run_gate(_spec(tmp_path, session="main"), "default", open_store(folder), folder, candidate, log=print)
    assert gate is not None
    page = html_bytes(gate.into_report(candidate)).decode()
    assert 'id="gate"' in page and "Vs baseline: regressed" in page and "session main" in page
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "Vs baseline" not in html_bytes(candidate).decode()


def test_the_summary_carries_the_step_numbers_where_the_diagnosis_left_them_out() -> None:
    job = noisy_job(n_steps=20, noise=0.0, step_us=20_000.0)
    job.diagnosis.slow_ranks = [SlowRank(rank=1, cause=Cause.HOST, confidence=0.9, slowdown_pct=31.25)]
    summary = with_step_numbers(ReportSummary(verdict="v"), job)
    assert summary.median_step_ms == pytest.approx(20.0, rel=0.02) and summary.p90_step_ms is not None
    assert summary.slowdown_percent == 31.2 or summary.slowdown_percent == 31.3
    kept = with_step_numbers(ReportSummary(median_step_ms=7.0, slowdown_percent=1.0), job)
    assert (kept.median_step_ms, kept.slowdown_percent) == (7.0, 1.0)
    assert with_step_numbers(ReportSummary(), report([])).median_step_ms is None
