"""docs/ci.md renders as a reader sees it (GitHub's CommonMark renderer, cmark-gfm): every code fence is closed by a
fence line of its own, so no prose or heading ends up inside a code block and every `##` heading of the source is a
heading of the page; the page has a step that records the baseline."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

cmarkgfm = pytest.importorskip("cmarkgfm")

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _fences(text: str) -> list[tuple[int, int | None]]:
    """(opening line, closing line or None) of each fenced block, by CommonMark's rule: a closing fence is a line of
    the same character, at least as long, with nothing but spaces after it."""
    blocks: list[tuple[int, int | None]] = []
    opened: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match is None:
            continue
        fence, rest = match.groups()
        if opened is None:
            opened = (number, fence)
        elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]) and not rest.strip():
            blocks.append((opened[0], number))
            opened = None
    if opened is not None:
        blocks.append((opened[0], None))
    return blocks


def test_every_fence_is_closed_and_every_heading_renders() -> None:
    text = PAGE.read_text(encoding="utf-8")
    unclosed = [start for start, end in _fences(text) if end is None]
    assert not unclosed, f"docs/ci.md: the code fence opened on line(s) {unclosed} is never closed"
    page = cmarkgfm.github_flavored_markdown_to_html(text)
    code = [unescape(c) for c in re.findall(r"<pre[^>]*><code[^>]*>(.*?)</code></pre>", page, re.DOTALL)]
    assert len(code) == len(_fences(text))
    assert not [c for c in code if "```" in c], "a fence line was swallowed into a code block"
    headings = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
    for heading in headings:
        assert f"<h2>{heading.replace('`', '')}" in re.sub(r"</?code>", "", page), heading


def test_the_page_says_how_to_record_the_baseline() -> None:
    page = cmarkgfm.github_flavored_markdown_to_html(PAGE.read_text(encoding="utf-8"))
    assert "<h2>Record the baseline</h2>" in page
    assert "this is the baseline run" in page
