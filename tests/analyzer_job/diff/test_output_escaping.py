"""Names from traces in what a pull request shows (issue 45, item 3): for any name, diff.md renders through GitHub's
Markdown (cmark-gfm, as the CI page does) with the name as plain text in its table cell and no heading, link or
image of its making, and diff-junit.xml parses as well-formed XML that still carries the gate's failure. The
reported injections (a newline and a carriage return before a heading, an image, a link) are checked by name."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_analyzer.diff.pr_summary import NAME_CHARS, junit, markdown
from stepscope_contract.diff import AddedWork, ChangeKind, DiffResult, DiffVerdict, SideSummary, TopChange
from stepscope_contract.text_escaping import markdown_shown, one_line

cmarkgfm = pytest.importorskip("cmarkgfm")
from cmarkgfm.cmark import Options  # noqa: E402

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]

INJECTIONS = [
    "aten::mm\n### ✅ passed\n![x](https://evil.example/x.png)",
    "op\r# heading\r[Approve PR](https://evil.example/approve)",
    "x | y | z",
    "`code` *em* _em_ **b** ~~s~~ $x^2$",
    "<script>alert(1)</script> &amp; &lt;",
    "www.evil.example http://evil.example a@evil.example",
    "1. item",
    "- item",
    "> quote",
    "    indented",
    "===",
    "\\|\\",
    "[a]: https://evil.example",
    "\x00\x01\x0b\x0c\x1b\x7f\x85\u2028\u2029\ufffe\uffff\ud800",
]
NAMES = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(max_size=120),
    st.lists(
        st.one_of(
            st.sampled_from(INJECTIONS),
            st.sampled_from(list("\n\r\t|`*_[]()!#<>&\\:.@~$-+=")),
            st.integers(0, 0x10FFFF).map(chr),
        ),
        max_size=40,
    ).map("".join),
)


def _diff(name: str) -> DiffResult:
    side = SideSummary(steps=30, ranks=2, ranks_analysed=2, median_step_us=40_000.0, p90_step_us=41_000.0)
    change = TopChange(
        name=name,
        kind="cpu_op",
        change=ChangeKind.ADDED,
        rank=1,
        baseline_us_per_step=0.0,
        candidate_us_per_step=9_000.0,
        delta_us_per_step=9_000.0,
        at_equal_op_speed_delta_us_per_step=9_000.0,
        count_delta=1.0,
    )
    return DiffResult(
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        verdict=DiffVerdict.REGRESSED,
        reason=f"steps 22.0% slower than the baseline; added work +22.5% on rank 1: {name}: more than the 15% allowed",
        max_regression_pct=15.0,
        confidence=0.9,
        regression_pct=22.0,
        regression_ci_low_pct=18.0,
        regression_ci_high_pct=26.0,
        added_work=AddedWork(us_per_step=9_000.0, rank=1, pct=22.5, ci_low_pct=20.0, ci_high_pct=25.0, names=[name]),
        decided_by=["steps", "added_work"],
        baseline=side,
        candidate=side,
        top_changes=[change],
        changes_total=1,
        notes=[f"waiting in {name} grew"],
    )


class _Cells(HTMLParser):
    """The rendered page's tables (rows of cell texts) and the tags it holds."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _render(text: str) -> _Cells:
    page = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    cells = _Cells()
    cells.feed(page)
    return cells


def _check_markdown(name: str) -> None:
    text = markdown(_diff(name), diff_url="https://ci.example/d/diff.html", report_url="https://ci.example/report")
    page = _render(text)
    assert [t for t in page.tags if t in ("h1", "h2", "h3", "h4", "h5", "h6")] == ["h3"], text
    assert page.tags.count("a") == 2 and "img" not in page.tags and "script" not in page.tags, text
    changes = page.tables[-1]
    assert len(changes) == 2 and len(changes[1]) == len(changes[0]), text  # one row, no cell added or lost
    assert changes[1][0] == markdown_shown(name, NAME_CHARS), (name, text)


def _check_junit(name: str) -> None:
    diff = _diff(name)
    data = junit(diff, diff_url="https://ci.example/d/diff.html").encode("utf-8")
    root = ET.fromstring(data)
    failure = root.find("testsuite/testcase/failure")
    assert root.get("failures") == "1" and failure is not None
    assert failure.get("message") == one_line(diff.reason)
    out = root.findtext("testsuite/testcase/system-out") or ""
    assert one_line(name, NAME_CHARS) in out


@pytest.mark.parametrize("name", INJECTIONS)
def test_the_reported_injections_render_as_plain_text(name: str) -> None:
    _check_markdown(name)
    _check_junit(name)


@given(NAMES)
def test_any_name_is_plain_text_in_diff_md(name: str) -> None:
    _check_markdown(name)


@given(NAMES)
def test_any_name_leaves_diff_junit_well_formed_with_its_failure(name: str) -> None:
    _check_junit(name)
