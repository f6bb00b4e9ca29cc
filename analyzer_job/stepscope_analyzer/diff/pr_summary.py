"""What a pull request shows of a diff: a Markdown summary (the verdict, the rule with the interval it reads, the
numbers the gate decided on, the first five changes by the figure they are ordered by, links to diff.html and
report.html) and a JUnit XML file with the gate as one test case (a failure when it regressed, an error when it
could not decide; the same changes and links), which CI systems show as a test result. Every text from a trace goes
through stepscope_contract.text_escaping (markdown_text, xml_text / xml_attr). Pure.
"""

from __future__ import annotations

from stepscope_contract.diff import DiffResult, DiffVerdict, TopChange
from stepscope_contract.text_escaping import markdown_link, markdown_text, one_line, xml_attr, xml_text

CHANGES = 5
NAME_CHARS = 100
TITLE = {
    DiffVerdict.PASSED: "✅ passed",
    DiffVerdict.IMPROVED: "✅ improved",
    DiffVerdict.REGRESSED: "❌ regressed",
    DiffVerdict.UNUSABLE: "⚠️ no decision",
}


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def _ms(us: float) -> str:
    return f"{us / 1000:+.2f} ms"


def rule_text(diff: DiffResult) -> str:
    """The gate's rule with the interval it reads, named as every output names it."""
    two_sided = f"{diff.confidence:.0%}"
    one_sided = f"{(1 + diff.confidence) / 2:.0%}"
    return (
        f"regressed when the lower end of a {two_sided} interval is above +{diff.max_regression_pct:g}% "
        f"(a slowdown beyond the gate with {one_sided} confidence)"
    )


def change_label(diff: DiffResult) -> str:
    """What the number a change shows (and is ordered by) is."""
    return "Δ per step at equal op speed" if diff.at_equal_op_speed else "Δ per step"


def change_where(c: TopChange) -> str:
    return f"rank {c.rank}" if c.rank is not None else "all ranks"


def decided_on(diff: DiffResult) -> list[tuple[str, str, str, bool]]:
    """(what, estimate, interval, lower end above the gate) for each figure the rule reads, in the rule's order."""
    steps = "steps at equal op speed" if diff.at_equal_op_speed else "steps (measured)"
    rows = [
        (
            steps,
            _pct(diff.regression_pct),
            f"{_pct(diff.regression_ci_low_pct)} to {_pct(diff.regression_ci_high_pct)}",
            "steps" in diff.decided_by and diff.verdict is DiffVerdict.REGRESSED,
        )
    ]
    w = diff.added_work
    if w is not None:
        where = f" (rank {w.rank})" if w.rank is not None else ""
        rows.append(
            (
                f"added work{where}",
                _pct(w.pct),
                f"{_pct(w.ci_low_pct)} to {_pct(w.ci_high_pct)}",
                "added_work" in diff.decided_by,
            )
        )
    return rows


def _change_row(c: TopChange, adjusted: bool) -> str:
    wait = f" (waiting {_ms(c.wait_delta_us_per_step)})" if abs(c.wait_delta_us_per_step) >= 1.0 else ""
    measured = f" {_ms(c.delta_us_per_step)} |" if adjusted else ""
    return (
        f"| {markdown_text(c.name, NAME_CHARS)} | {markdown_text(c.kind, 32)} | {c.change.value} | "
        f"{_ms(c.at_equal_op_speed_delta_us_per_step)}{wait} |{measured} {c.count_delta:+.2f} | {change_where(c)} |"
    )


def _changes(diff: DiffResult) -> list[str]:
    if not diff.top_changes:
        return []
    adjusted = diff.at_equal_op_speed
    order = "largest decrease first" if diff.verdict is DiffVerdict.IMPROVED else "largest increase first"
    head = (
        f"| name | kind | change | {change_label(diff)} |"
        + (" Δ measured |" if adjusted else "")
        + " Δ calls | where |"
    )
    return [
        "",
        f"First {min(CHANGES, len(diff.top_changes))} of {diff.changes_total} changes, by {change_label(diff)} "
        f"({order}; self time):",
        "",
        head,
        "|---|---|---|---|" + ("---|" if adjusted else "") + "---|---|",
        *(_change_row(c, adjusted) for c in diff.top_changes[:CHANGES]),
    ]


def markdown(diff: DiffResult, *, diff_url: str | None = None, report_url: str | None = None) -> str:
    """Every text from a trace (names, the reason and notes that quote them) goes through markdown_text."""
    lines = [
        f"### stepscope gate: {TITLE[diff.verdict]}",
        "",
        markdown_text(diff.reason),
        "",
        markdown_text(f"The gate: {rule_text(diff)}."),
        "",
        f"| decided on | estimate | {diff.confidence:.0%} interval | lower end above the gate |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {markdown_text(what)} | {est} | {interval} | {'yes: fails' if above else 'no'} |"
        for what, est, interval, above in decided_on(diff)
    ]
    lines += _changes(diff)
    if diff.notes:
        lines += ["", *(f"- {markdown_text(n, 600)}" for n in diff.notes[:3])]
    links = [markdown_link(label, url) for label, url in (("diff.html", diff_url), ("report.html", report_url)) if url]
    if links:
        lines += ["", " · ".join(links)]
    return "\n".join(lines) + "\n"


def junit(diff: DiffResult, *, diff_url: str | None = None, report_url: str | None = None) -> str:
    """One test suite with one test case, `stepscope.gate`; failures=1 when regressed, errors=1 when unusable. Every
    text goes through xml_text / xml_attr, so the file is well-formed whatever a trace names."""
    failed = diff.verdict is DiffVerdict.REGRESSED
    error = diff.verdict is DiffVerdict.UNUSABLE
    body = "\n".join(f"{what}: {est} ({diff.confidence:.0%} interval {iv})" for what, est, iv, _ in decided_on(diff))
    changes = "\n".join(
        f"{_ms(c.at_equal_op_speed_delta_us_per_step)}/step {c.change.value} {one_line(c.kind, 32)} "
        f"{change_where(c)} {one_line(c.name, NAME_CHARS)}"
        for c in diff.top_changes[:CHANGES]
    )
    if changes:
        changes = f"changes by {change_label(diff)}:\n{changes}"
    links = "\n".join(f"{label}: {url}" for label, url in (("diff", diff_url), ("report", report_url)) if url)
    detail = xml_text(f"{body}\n{changes}\n{links}".strip())
    reason = one_line(diff.reason)
    inner = ""
    if failed:
        inner = f'<failure message={xml_attr(reason)} type="regressed">{detail}</failure>'
    elif error:
        inner = f'<error message={xml_attr(reason)} type="unusable">{detail}</error>'
    out = xml_text(f"{diff.verdict.value}: {reason}\nthe gate: {rule_text(diff)}\n{body}\n{changes}\n{links}".strip())
    case = xml_attr(f"steps within +{diff.max_regression_pct:g}% of the baseline")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="stepscope" tests="1" failures="{int(failed)}" errors="{int(error)}">\n'
        f'  <testsuite name="stepscope.gate" tests="1" failures="{int(failed)}" errors="{int(error)}">\n'
        f'    <testcase classname="stepscope.gate" name={case}>'
        f"{inner}<system-out>{out}</system-out></testcase>\n"
        "  </testsuite>\n"
        "</testsuites>\n"
    )
