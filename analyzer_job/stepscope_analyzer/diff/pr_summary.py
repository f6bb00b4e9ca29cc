"""What a pull request shows of a diff: a Markdown summary (the verdict, the numbers the gate decided on, the first
five changes, links to diff.html and report.html) and a JUnit XML file with the gate as one test case (a failure
when it regressed, an error when it could not decide), which CI systems show as a test result. Pure.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from stepscope_contract.diff import DiffResult, DiffVerdict, TopChange

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


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("\n", " ")


def _ms(us: float) -> str:
    return f"{us / 1000:+.2f} ms"


def decided_on(diff: DiffResult) -> list[tuple[str, str, str, bool]]:
    """(what, estimate, interval, clears the gate) for each figure the rule reads, in the rule's order."""
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


def _change_row(c: TopChange) -> str:
    where = f"rank {c.rank}" if c.rank is not None else "all ranks"
    wait = f" (waiting {_ms(c.wait_delta_us_per_step)})" if abs(c.wait_delta_us_per_step) >= 1.0 else ""
    return (
        f"| `{_cell(c.name[:NAME_CHARS])}` | {c.kind} | {c.change.value} | {_ms(c.delta_us_per_step)}{wait} | "
        f"{c.count_delta:+.2f} | {where} |"
    )


def markdown(diff: DiffResult, *, diff_url: str | None = None, report_url: str | None = None) -> str:
    lines = [
        f"### stepscope gate: {TITLE[diff.verdict]}",
        "",
        diff.reason,
        "",
        f"Regressed when the lower end of an interval ({diff.confidence:.0%}) is above the gate, "
        f"+{diff.max_regression_pct:g}%:",
        "",
        "| decided on | estimate | interval | clears the gate |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {what} | {est} | {interval} | {'yes' if clears else 'no'} |"
        for what, est, interval, clears in decided_on(diff)
    ]
    if diff.at_equal_op_speed and diff.step_regression_pct is not None:
        lines += [
            "",
            f"Measured steps {_pct(diff.step_regression_pct)}; the unchanged ops ran "
            f"{_pct(diff.unchanged_ops_speed_pct)} per call (the machine's speed, taken out).",
        ]
    if diff.top_changes:
        lines += [
            "",
            f"First {min(CHANGES, len(diff.top_changes))} of {diff.changes_total} changes (self time per step):",
            "",
            "| name | kind | change | Δ per step | Δ calls | where |",
            "|---|---|---|---|---|---|",
        ]
        lines += [_change_row(c) for c in diff.top_changes[:CHANGES]]
    if diff.notes:
        lines += ["", *(f"- {_cell(n)}" for n in diff.notes[:3])]
    links = [f"[diff.html]({diff_url})" if diff_url else "", f"[report.html]({report_url})" if report_url else ""]
    if any(links):
        lines += ["", " · ".join(x for x in links if x)]
    return "\n".join(lines) + "\n"


def junit(diff: DiffResult) -> str:
    """One test suite with one test case, `stepscope.gate`; failures=1 when regressed, errors=1 when unusable."""
    failed = diff.verdict is DiffVerdict.REGRESSED
    error = diff.verdict is DiffVerdict.UNUSABLE
    body = "\n".join(f"{what}: {est} ({interval})" for what, est, interval, _ in decided_on(diff))
    changes = "\n".join(
        f"{c.delta_us_per_step / 1000:+.2f} ms/step {c.change.value} {c.kind} {c.name[:NAME_CHARS]}"
        for c in diff.top_changes[:CHANGES]
    )
    detail = escape(f"{body}\n{changes}".strip())
    inner = ""
    if failed:
        inner = f'<failure message={quoteattr(diff.reason)} type="regressed">{detail}</failure>'
    elif error:
        inner = f'<error message={quoteattr(diff.reason)} type="unusable">{detail}</error>'
    out = escape(f"{diff.verdict.value}: {diff.reason}\n{body}\n{changes}".strip())
    case = quoteattr(f"steps within +{diff.max_regression_pct:g}% of the baseline")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="stepscope" tests="1" failures="{int(failed)}" errors="{int(error)}">\n'
        f'  <testsuite name="stepscope.gate" tests="1" failures="{int(failed)}" errors="{int(error)}">\n'
        f'    <testcase classname="stepscope.gate" name={case}>'
        f"{inner}<system-out>{out}</system-out></testcase>\n"
        "  </testsuite>\n"
        "</testsuites>\n"
    )
