"""docs/security.md's table of the operator's grants says what the chart renders: every rule the operator's account
gets, in every way the chart can be installed (namespaced, cluster-wide, onboarding by label, a given master), is
on a row of the table that names its resource and its verb, and the analyzer's account gets none."""

from __future__ import annotations

import re

import pytest
from helm_chart import RELEASE_NAMESPACE, REPO, grants, render

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TABLE_HEADING = "## The operator's grants, and what each is for"
INSTALLS = {
    "cluster-wide": (),
    "namespaced": ("operator.watchNamespaces={team-a,team-b}",),
    "by label": ("onboarding.byLabel=true",),
    "a given master": ("sidecar.token.value=0123456789abcdef0123",),
}


def _documented_rows() -> list[str]:
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    table = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    return [line.split("|")[1] for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]


def _word(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])")


@pytest.mark.parametrize("sets", INSTALLS.values(), ids=INSTALLS.keys())
def test_every_rendered_grant_is_on_a_row_of_the_table(sets: tuple[str, ...]) -> None:
    rows = _documented_rows()
    assert rows, f"no table under {TABLE_HEADING!r}"
    rendered = grants(render(sets=sets), "stepscope-operator", RELEASE_NAMESPACE)
    assert rendered, "the operator's account got no rules"
    missing = set()
    for rules in rendered.values():
        for _group, resource, verb in rules:
            base = resource.split(":", 1)[0]
            name, _, sub = base.partition("/")
            on_a_row = any(_word(name).search(row) and _word(verb).search(row) for row in rows)
            sub_named = not sub or any(_word(name).search(row) and f"/{sub}" in row for row in rows)
            if not (on_a_row and sub_named):
                missing.add(f"{base} {verb}")
    assert missing == set(), "add these grants, and what each is for, to docs/security.md's table"
