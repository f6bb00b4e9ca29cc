"""`stepscope diff BASELINE CANDIDATE -o OUT [--max-regression PCT]`: read both sides, diff them, write diff.json,
diff.html, diff.md (a pull request's summary) and diff-junit.xml (the gate as a test result), print the verdict and
the numbers it was decided on. Exit 0 within the gate (or faster), 1 regression, 2 unusable input."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope_analyzer.diff.args import diff_parser
from stepscope_contract.constants import DIFF_HTML, DIFF_JSON, DIFF_JUNIT, DIFF_MD
from stepscope_contract.diff import DiffVerdict

if TYPE_CHECKING:
    from stepscope_contract.diff import DiffResult

EXIT_PASSED = 0
EXIT_REGRESSED = 1
EXIT_UNUSABLE = 2
EXIT_CODES = {
    DiffVerdict.PASSED: EXIT_PASSED,
    DiffVerdict.IMPROVED: EXIT_PASSED,
    DiffVerdict.REGRESSED: EXIT_REGRESSED,
    DiffVerdict.UNUSABLE: EXIT_UNUSABLE,
}
PRINTED_CHANGES = 5


def _progress(side: str) -> Callable[[str], None]:
    """Progress of reading one side, each line naming it: the two sides' lines never read as one told twice."""

    def say(message: str) -> None:
        print(f"{side}: {message}", file=sys.stderr, flush=True)

    return say


def _summary_lines(diff: DiffResult, out: Path) -> list[str]:
    from stepscope_analyzer.diff.page import signed_us
    from stepscope_analyzer.diff.pr_summary import change_label, change_where, decided_on, rule_text
    from stepscope_contract.text_escaping import one_line

    lines = [f"{diff.verdict.value}: {one_line(diff.reason)}", f"the gate: {rule_text(diff)}"]
    for what, estimate, interval, above in decided_on(diff):
        lines.append(
            f"  {what:<26} {estimate:>8}  {diff.confidence:.0%} interval {interval:<20} "
            f"{'lower end above the gate' if above else 'within'}"
        )
    if diff.top_changes:
        lines.append(f"changes, by {change_label(diff)}:")
    for c in diff.top_changes[:PRINTED_CHANGES]:
        lines.append(
            f"  {signed_us(c.at_equal_op_speed_delta_us_per_step):>11}/step  {c.change.value:<7} {c.kind:<15} "
            f"{change_where(c):<9} {one_line(c.name, 100)}"
        )
    for name in (DIFF_HTML, DIFF_JSON, DIFF_MD, DIFF_JUNIT):
        lines.append(f"{name + ':':<16}{(out / name).resolve()}")
    return lines


def diff_main(argv: list[str]) -> int:
    args = diff_parser().parse_args(argv)
    # the command's work, imported once its arguments are parsed (`--help` and a usage error load none of it)
    from stepscope_analyzer.diff.compare import DiffConfig, diff_reports
    from stepscope_analyzer.diff.page import diff_html_bytes
    from stepscope_analyzer.diff.pr_summary import junit, markdown
    from stepscope_analyzer.diff.sides import SideError, load_side
    from stepscope_analyzer.output_files import write_files
    from stepscope_analyzer.report import model_json_bytes
    from stepscope_storage import Connection

    connection = Connection.from_args(args)
    try:
        baseline = load_side(args.baseline, connection, top_n=args.top_n, progress=_progress("baseline"))
        candidate = load_side(args.candidate, connection, top_n=args.top_n, progress=_progress("candidate"))
    except SideError as exc:
        print(f"stepscope diff: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    config = DiffConfig(max_regression_pct=args.max_regression, confidence=args.confidence, wall_clock=args.wall_clock)
    diff = diff_reports(baseline, candidate, config, baseline_source=args.baseline, candidate_source=args.candidate)
    out = Path(args.output)
    try:
        write_files(
            out,
            {
                DIFF_JSON: model_json_bytes(diff),
                DIFF_HTML: diff_html_bytes(diff),
                DIFF_MD: markdown(diff, diff_url=args.diff_url, report_url=args.report_url).encode(),
                DIFF_JUNIT: junit(diff, diff_url=args.diff_url, report_url=args.report_url).encode(),
            },
        )
    except OSError as exc:
        print(f"stepscope diff: cannot write to {out}: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    print("\n".join(_summary_lines(diff, out)))
    return EXIT_CODES[diff.verdict]
