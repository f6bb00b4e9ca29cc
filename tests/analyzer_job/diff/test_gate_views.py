"""The gate where people look (issue 47), from the analyzer's real gate step on a file:// store:

- `kubectl get profilesessions`: the CRD's Gate and Vs Baseline columns, rendered as the API server's Table from real
  status documents: Regressed with the figure that decided it, Passed with the steps' figure, `—` without a baseline;
  the status message reads as one sentence;
- a gated report opens with the gate's box (the slow-rank story after it);
- the change list is ordered by the number it shows, in diff.md, diff.html, JUnit, the report and the status alike;
- diff.md, JUnit and the report's comparison link under spec.storage.urlBase (https) when it is set.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from report_maker import noisy_job, rank, report

from stepscope_analyzer.commands.gate_step import GateOutcome, run_gate, without_gate, write_index_entry
from stepscope_analyzer.diff.page import render_diff_html
from stepscope_analyzer.diff.pr_summary import junit, markdown
from stepscope_analyzer.ranks.storage_io import location_of, open_store
from stepscope_analyzer.report import model_json_bytes, render_html
from stepscope_contract.constants import DIFF_JUNIT, DIFF_MD
from stepscope_contract.diff import DiffResult, DiffVerdict
from stepscope_contract.report import Report
from stepscope_contract.session import NO_BASELINE, ProfileSessionSpec, ProfileSessionStatus, ReportSummary
from stepscope_contract.storage import REPORT_JSON, report_location
from stepscope_local.kube.resources import types_from_crd
from stepscope_local.kube.table import table
from stepscope_operator.session.status import with_gate

pytestmark = pytest.mark.unit

CRD = Path(__file__).resolve().parents[3] / "crds" / "profilesessions.stepscope.dev.yaml"
OPS = {f"aten::op{i}": (300.0 * (i + 1) * 20, 20) for i in range(6)}
VERDICT = "No slow rank: the 2 analysed ranks are balanced, 2 of 2 ranks analysed."


def _spec(root: Path, url_base: str | None = None) -> ProfileSessionSpec:
    storage: dict[str, Any] = {"uri": f"file://{root}/sessions"}
    if url_base:
        storage["urlBase"] = url_base
    return ProfileSessionSpec.model_validate(
        {
            "targets": {"jobRef": {"kind": "Job", "name": "t"}},
            "storage": storage,
            "baseline": {"session": "main"},
            "gate": {"maxRegressionPercent": 15},
        }
    )


def _job(factor: float, seed: int, extra: dict[str, tuple[float, int]] | None = None) -> Report:
    base = noisy_job(n_steps=20, noise=0.03, seed=seed)
    ops = {**OPS, **(extra or {})}
    return report([rank(r.rank, [d * factor for d in r.steps.durations_us], functions=ops) for r in base.ranks])


def _gate(root: Path, candidate: Report, url_base: str | None = None) -> tuple[GateOutcome, Any, Any]:
    base = _job(1.0, 1)
    folder = location_of(f"file://{root}/sessions/default/main-abcd1234")
    store = open_store(folder)
    url = store.write(report_location(folder).key(REPORT_JSON), model_json_bytes(base), "application/json")
    write_index_entry(
        _spec(root), base, store, namespace="default", name="main", uid="abcd1234", folder=folder, report_json=url,
        log=print,
    )  # fmt: skip
    here = location_of(f"file://{root}/sessions/default/ci-ffff0000")
    where = report_location(here)
    gate = run_gate(_spec(root, url_base), "default", open_store(here), where, candidate, log=print)
    assert gate is not None and gate.diff is not None
    return gate, open_store(here), where


def _regressed(root: Path, url_base: str | None = None) -> tuple[GateOutcome, Any, Any]:
    added = {"added_work": (9_000.0 * 20, 20), "aten::mm": (2_500.0 * 20, 20), "aten::tanh": (1_200.0 * 20, 40)}
    return _gate(root, _job(1.35, 2, added), url_base)


def _row(summary: ReportSummary, name: str) -> dict[str, Any]:
    status = ProfileSessionStatus(phase="Succeeded", progress="2/2", summary=summary, message="m")
    obj = {
        "apiVersion": "stepscope.dev/v1alpha1",
        "kind": "ProfileSession",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {},
        "status": status.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    rtype = types_from_crd(yaml.safe_load(CRD.read_text()))[0]
    rendered = table(rtype, [obj], "1", "None")
    names = [c["name"] for c in rendered["columnDefinitions"]]
    return dict(zip(names, rendered["rows"][0]["cells"], strict=True))


def test_the_gate_column_for_a_regressed_a_passed_and_a_baseline_less_session(tmp_path: Path) -> None:
    regressed, _, _ = _regressed(tmp_path / "r")
    passed, _, _ = _gate(tmp_path / "p", _job(1.0, 3))
    assert regressed.diff is not None and regressed.diff.verdict is DiffVerdict.REGRESSED
    assert passed.diff is not None and passed.diff.verdict is DiffVerdict.PASSED
    bad = regressed.into_summary(ReportSummary(verdict=VERDICT))
    good = passed.into_summary(ReportSummary(verdict=VERDICT))
    rows = {
        "ci-bad": _row(bad, "ci-bad"),
        "ci-good": _row(good, "ci-good"),
        "main": _row(without_gate(ReportSummary(verdict=VERDICT)), "main"),
    }
    assert rows["ci-bad"]["Gate"] == "Regressed" and rows["ci-good"]["Gate"] == "Passed"
    assert rows["main"]["Gate"] == NO_BASELINE and rows["main"]["Vs Baseline"] is None
    d = regressed.diff
    work = d.added_work
    decided = f"{work.pct:+.1f}% added work" if "added_work" in d.decided_by and work else f"{d.regression_pct:+.1f}%"
    assert rows["ci-bad"]["Vs Baseline"].startswith(decided), rows["ci-bad"]
    assert rows["ci-good"]["Vs Baseline"].startswith(f"{passed.diff.regression_pct:+.1f}% steps"), rows["ci-good"]
    message = with_gate(VERDICT, bad, regressed.condition[1])
    assert message == f"{VERDICT[:-1]}; gate: Regressed, {bad.gate_figure}."
    assert ".;" not in message and ". " not in message and message.endswith(".")


def _shown_ms(text: str) -> list[float]:
    return [float(m) for m in re.findall(r"([+-]\d+\.\d+) ms", text)]


def test_the_list_is_ordered_by_the_number_it_shows_everywhere(tmp_path: Path) -> None:
    gate, store, where = _regressed(tmp_path)
    d = gate.diff
    assert d is not None and len(d.top_changes) >= 3
    figures = [c.at_equal_op_speed_delta_us_per_step for c in d.top_changes]
    assert figures == sorted(figures, reverse=True)
    md = store.read(where.key(DIFF_MD)).decode()
    rows = [line for line in md.splitlines() if line.startswith("| ") and " ms |" in line]
    shown = [_shown_ms(line)[0] for line in rows]
    assert shown == sorted(shown, reverse=True) and len(shown) == min(5, len(d.top_changes)), md
    assert shown == [round(f / 1000, 2) for f in figures[: len(shown)]]
    suite = ET.fromstring(store.read(where.key(DIFF_JUNIT)))
    out = suite.findtext("testsuite/testcase/system-out") or ""
    listed = [float(x) for x in re.findall(r"^([+-]\d+\.\d+) ms/step", out, re.MULTILINE)]
    assert listed == shown
    page = render_diff_html(d)
    cells = re.findall(r'<td class="num" style="color: #[0-9a-f]+">([+-][\d.]+ (?:ms|µs|s))</td>', page)
    assert len(cells) == len(d.top_changes)
    summary = gate.into_summary(ReportSummary(verdict="v"))
    assert [c.name for c in summary.top_changes or []] == [c.name for c in d.top_changes[:5]]
    status = [c.at_equal_op_speed_delta_us_per_step for c in summary.top_changes or []]
    assert status == sorted(status, reverse=True)  # type: ignore[type-var]
    section = gate.into_report(_job(1.0, 9)).vs_baseline
    assert section is not None and [c.name for c in section.top_changes] == [c.name for c in d.top_changes[:20]]


def test_one_rank_per_fact(tmp_path: Path) -> None:
    """The added work's rank and the top change's rank are the same when they tell of the same name."""
    base = _job(1.0, 1)
    ranks = []
    for r in base.ranks:
        extra = {"added_work": ((9_000.0 if r.rank == 0 else 8_800.0) * 20, 20)}
        ranks.append(rank(r.rank, [d * 1.3 for d in r.steps.durations_us], functions={**OPS, **extra}))
    gate, _, _ = _gate(tmp_path, report(ranks))
    d = gate.diff
    assert d is not None and d.added_work is not None and "added_work" in d.added_work.names
    told = {c.rank for c in d.top_changes if c.name == "added_work"}
    assert told <= {d.added_work.rank, None}
    ranks_in_reason = set(re.findall(r"rank (\d+)", d.reason))
    assert len(ranks_in_reason) <= 1, d.reason


def test_a_gated_report_opens_with_the_gate(tmp_path: Path) -> None:
    gate, _, _ = _regressed(tmp_path)
    page = render_html(gate.into_report(_job(1.35, 2)))
    first = re.search(r'<section class="verdict (\w+)" id="(\w+)"[^>]*>\s*<div class="line">([^<]*)</div>', page)
    assert first is not None and first.groups() == ("error", "gate", "Vs baseline: regressed"), page[:3000]
    assert page.index('id="gate"') < page.index('id="verdict"')
    plain = render_html(_job(1.0, 2))
    assert 'id="gate"' not in plain and 'id="verdict"' in plain


def test_links_open_over_https_when_a_url_base_is_set(tmp_path: Path) -> None:
    base = "https://reports.example.com/stepscope"
    gate, store, where = _regressed(tmp_path, url_base=base)
    md = store.read(where.key(DIFF_MD)).decode()
    links = re.findall(r"\]\(([^)]*)\)", md)
    folder = f"{base}/default/ci-ffff0000/report"
    assert links == [f"{folder}/diff.html", f"{folder}/report.html"], md
    out = ET.fromstring(store.read(where.key(DIFF_JUNIT))).findtext("testsuite/testcase/system-out") or ""
    assert f"diff: {folder}/diff.html" in out and f"report: {folder}/report.html" in out
    section = gate.into_report(_job(1.0, 9)).vs_baseline
    assert section is not None and section.diff_url == f"{folder}/diff.html"
    assert f'<a href="{folder}/diff.html">' in render_html(gate.into_report(_job(1.0, 9)))
    # without a base the storage URIs are what there is
    _, store2, where2 = _regressed(tmp_path / "plain")
    assert re.findall(r"\]\((file://[^)]*)\)", store2.read(where2.key(DIFF_MD)).decode())


def test_markdown_and_junit_name_the_interval(tmp_path: Path) -> None:
    gate, _, _ = _regressed(tmp_path)
    d: DiffResult | None = gate.diff
    assert d is not None
    md = markdown(d)
    assert "90% interval" in md and "95% confidence" in md and "clears the gate" not in md
    assert "90% interval" in (ET.fromstring(junit(d)).findtext("testsuite/testcase/system-out") or "")
