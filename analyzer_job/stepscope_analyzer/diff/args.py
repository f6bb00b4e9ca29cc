"""`stepscope diff`'s argument parser, apart from the command: its `--help` loads this module, argparse and the
defaults it shows (stepscope_cli.main), none of the diff's work."""

from __future__ import annotations

import argparse

from stepscope_analyzer.diff.defaults import DIFF_TOP_N
from stepscope_contract.constants import DIFF_HTML
from stepscope_storage.connection import add_arguments as add_storage_arguments


def _percent(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1000.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1000, got {text}")
    return value


def _level(text: str) -> float:
    value = float(text)
    if not 0.5 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0.5, 1), got {text}")
    return value


def diff_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stepscope diff",
        description="Compare a candidate run with a baseline: step time and its phases, per rank and job-wide, and "
        "each kernel/op/function's time and calls per step. Fails (exit 1) when the candidate's steps are slower "
        "than the gate allows with confidence; exit 2 when a side cannot be used.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    for side in ("baseline", "candidate"):
        p.add_argument(side, help="session folder or URI, folder of traces, one trace, or a report.json")
    p.add_argument("-o", "--output", default="stepscope-diff", help="output folder")
    p.add_argument("--max-regression", type=_percent, default=10.0, metavar="PCT", help="allowed slowdown, %%")
    p.add_argument("--confidence", type=_level, default=0.90, help="two-sided level of the interval")
    p.add_argument(
        "--wall-clock",
        action="store_true",
        help="decide on the measured step times (default: at equal op speed, the unchanged ops' per-call change "
        "taken for the machine's speed and taken out)",
    )
    add_storage_arguments(p)
    p.add_argument("--top-n", type=int, default=DIFF_TOP_N, help="names kept per rank when analysing traces")
    p.add_argument("--diff-url", default=DIFF_HTML, help="where diff.md links diff.html (e.g. the CI artifact's URL)")
    p.add_argument("--report-url", default=None, help="where diff.md links the candidate's report.html")
    return p


__all__ = ["diff_parser"]
