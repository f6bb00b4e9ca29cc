"""diff.html: self-contained, in the report's style, every name from a trace or a command line escaped; it shows
the verdict first, the interval against the gate, and the top changes; an unusable diff still renders."""

from __future__ import annotations

import pytest
from report_maker import noisy_job, rank, report

from stepscope_analyzer.diff import DiffConfig, diff_html_bytes, diff_reports
from stepscope_analyzer.report import html_bytes
from stepscope_contract.report import SessionInfo, StepPhases
from stepscope_testing.html_tags import TagCollector as _Collector

pytestmark = pytest.mark.unit

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "' onmouseover='alert(3)",
    "</svg><svg onload=alert(4)>",
    "{{ 7*7 }} {% raw %}",
    "x" * 10_000,
    "bad\udcffbytes\udc80<b>",
]
PAGE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "section", "div", "dl", "dt", "dd", "span",
    "table", "tr", "th", "td", "p", "svg", "rect", "text", "ul", "li",
}  # fmt: skip


def _hostile_diff() -> bytes:
    steps = [10_000.0] * 8
    phases = StepPhases(forward=4000, backward=6000)
    base = report([rank(0, steps, functions={n: (1000.0, 8) for n in HOSTILE}, phases=phases)])
    base.session = SessionInfo(namespace=HOSTILE[1], name=HOSTILE[0])
    cand = report([rank(0, [14_000.0] * 8, functions={n: (9000.0, 16) for n in HOSTILE}, phases=phases)], world_size=3)
    d = diff_reports(base, cand, DiffConfig(max_regression_pct=15), baseline_source=HOSTILE[3], candidate_source="b")
    return diff_html_bytes(d)


def test_hostile_names_are_escaped() -> None:
    page = _hostile_diff().decode("utf-8")
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert {t for t, _ in parser.tags} <= PAGE_TAGS, "no element from a name may reach the page"
    for tag, attrs in parser.tags:
        for name, value in attrs:
            assert not name.startswith("on"), f"event handler attribute on <{tag}>"
            assert name not in ("src", "href", "srcdoc", "xlink:href"), "the page loads nothing"
            assert "javascript:" not in (value or "")
    text = "".join(parser.text)
    for name in HOSTILE[:4]:
        assert name in text, f"{name!r} is shown as text"
    assert "{{ 7*7 }}" in text
    assert "bad\ufffdbytes" in text or "bad?bytes" in text
    titles = [v for _, attrs in parser.tags for k, v in attrs if k == "title"]
    assert "x" * 10_000 in titles  # whole in the tooltip, cut in the table
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


def test_page_is_self_contained_in_the_reports_style() -> None:
    base, cand = noisy_job(seed=1, noise=0.05), noisy_job(seed=2, noise=0.05)
    for r in cand.ranks:
        r.steps.durations_us = [d * 1.4 for d in r.steps.durations_us]
        r.top_functions = []
    d = diff_reports(base, cand, DiffConfig(max_regression_pct=15))
    page = diff_html_bytes(d).decode()
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page
    body = page[page.index("<body>") :]
    assert body.index("more than the 15% allowed") < body.index('id="changes"')
    assert 'class="verdict error"' in page
    assert 'id="interval"' in page and "gate +15%" in page
    report_page = html_bytes(base).decode()
    style = report_page[report_page.index("<style>") : report_page.index("</style>")]
    assert style in page  # one style sheet for both pages


def test_an_unusable_diff_still_renders() -> None:
    d = diff_reports(report([rank(0, [1000.0])]), noisy_job(), DiffConfig())
    page = diff_html_bytes(d).decode()
    assert "stepscope diff: unusable" in page
    assert 'class="verdict slow"' in page
    assert 'id="interval"' not in page
