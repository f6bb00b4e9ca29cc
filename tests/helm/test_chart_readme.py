"""The chart documents itself: README.md is generated from values.yaml (tools/gen_chart_readme.py) and current,
every value has a description, and `helm lint` has nothing left to recommend (the icon)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helm_chart import CHART, REPO, run_helm

sys.path.insert(0, str(REPO / "tools"))

from gen_chart_readme import main, render, rows

pytestmark = pytest.mark.unit


def test_the_chart_readme_is_generated_from_the_current_values() -> None:
    assert main([str(CHART), "--check"]) == 0, "run: python tools/gen_chart_readme.py helm/stepscope"


def test_every_value_has_a_description() -> None:
    table = rows((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert len(table) > 50
    undocumented = [row.key for row in table if not row.description]
    assert undocumented == [], "add a '# -- ' comment above each of these keys in values.yaml"


def test_rows_follow_helm_docs_comments() -> None:
    text = """\
# a note, not a description
top:
  # -- Described as a whole.
  whole:
    a: 1
  open:
    # -- A leaf
    # on two lines.
    leaf: "x"
"""
    table = rows(text)
    assert [(r.key, r.type, r.default, r.description) for r in table] == [
        ("top.whole", "object", '{"a":1}', "Described as a whole."),
        ("top.open.leaf", "string", '"x"', "A leaf on two lines."),
    ]


def test_untrusted_looking_text_in_a_description_stays_text() -> None:
    page = render(CHART)
    assert "<fullname>" not in page.split("## Values", 1)[1]
    assert "&lt;fullname&gt;" in page


@pytest.mark.integration
def test_helm_lint_recommends_nothing() -> None:
    result = run_helm("lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[INFO]" not in result.stdout, result.stdout
    assert Path(CHART / "icon.svg").read_text(encoding="utf-8").startswith("<svg")
