"""What a pull request shows: the Markdown summary gives the verdict, the numbers the gate decided on (the same
figures as diff.json), the first five changes and the links; the JUnit file is one test case that fails when the
gate regressed, errs when it could not decide, and passes otherwise, and parses as XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from report_maker import noisy_job, rank, report

from stepscope_analyzer.diff import DiffConfig, diff_reports
from stepscope_analyzer.diff.pr_summary import junit, markdown
from stepscope_contract.diff import DiffVerdict

pytestmark = pytest.mark.unit

OPS = {f"aten::op{i}": (100.0 * (i + 1) * 30, (i + 1) * 30) for i in range(8)}


def _regressed():
    base = report([rank(r, [40_000.0 * (1 + 0.005 * (k % 4)) for k in range(30)], functions=OPS) for r in range(2)])
    added = {**OPS, "aten::tanh|x": (12_000.0 * 30, 30), "aten::mm": (2_000.0 * 30, 30)}
    slow = [52_000.0 * (1 + 0.005 * (k % 4)) for k in range(30)]
    return diff_reports(base, report([rank(r, slow, functions=added) for r in range(2)]), DiffConfig(15.0))


def test_markdown_states_the_decided_numbers_and_the_changes() -> None:
    d = _regressed()
    assert d.verdict is DiffVerdict.REGRESSED and d.added_work is not None
    text = markdown(d, diff_url="https://ci.example/diff.html", report_url="https://ci.example/report.html")
    assert text.startswith("### stepscope gate: ❌ regressed")
    assert f"{d.regression_ci_low_pct:+.1f}% to {d.regression_ci_high_pct:+.1f}%" in text
    assert f"{d.added_work.ci_low_pct:+.1f}% to {d.added_work.ci_high_pct:+.1f}%" in text
    assert "| added work (rank 0) |" in text and "| yes: fails |" in text
    assert "| aten\\:\\:tanh\\|x |" in text  # a table cell cannot be broken by a name
    assert "[diff.html](https://ci.example/diff.html) · [report.html](https://ci.example/report.html)" in text
    assert text.count("\n| aten") <= 5


def test_junit_fails_errs_or_passes_with_the_verdict() -> None:
    bad = ET.fromstring(junit(_regressed()))
    assert bad.get("failures") == "1" and bad.find("testsuite/testcase/failure") is not None
    ok = ET.fromstring(junit(diff_reports(noisy_job(seed=1), noisy_job(seed=2), DiffConfig(15.0))))
    assert ok.get("failures") == "0" and ok.get("errors") == "0"
    case = ok.find("testsuite/testcase")
    assert case is not None and case.find("failure") is None and "passed" in (case.findtext("system-out") or "")
    few = ET.fromstring(junit(diff_reports(noisy_job(n_steps=2), noisy_job(n_steps=2, seed=3), DiffConfig(15.0))))
    assert few.get("errors") == "1" and few.find("testsuite/testcase/error") is not None
