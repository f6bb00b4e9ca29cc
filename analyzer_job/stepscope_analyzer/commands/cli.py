"""`stepscope analyze` (local runs) and the entry of `stepscope analyzer-job` (see session_job.py).

Kept light: `stepscope analyze` parses its arguments, then imports the command's modules; the rank workers are
forked once the traces are found, as the first one is handed out (ranks/pipeline), and only for a job that uses
workers."""

from __future__ import annotations

import argparse
import gc
import time

from stepscope_analyzer.commands.console import EXIT_PARTIAL


def analyze_parser() -> argparse.ArgumentParser:
    from stepscope_storage.connection import add_arguments as add_storage_arguments

    p = argparse.ArgumentParser(
        prog="stepscope analyze",
        description="Analyse Kineto traces of a distributed PyTorch job: a stepscope session folder "
        "(traces/rank<R>.pt.trace.json.gz, or the first layout's ranks/<rank>/...) or a folder of "
        "*.pt.trace.json[.gz] files, local or in object storage.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("source", help="folder, file, file:///path, s3://bucket/prefix or oss://bucket/prefix")
    p.add_argument("-o", "--output", default="stepscope-report", help="output folder")
    add_storage_arguments(p)
    p.add_argument("--top-n", type=int, default=50, help="top kernels/functions kept per rank")
    p.add_argument(
        "--outlier-threshold",
        type=float,
        default=None,
        help="robust z-score of an outlier rank (unset: the session's spec.analysis in a session folder, else 3.5)",
    )
    p.add_argument(
        "--min-slowdown-percent",
        type=float,
        default=None,
        help="the user's floor: excesses below this share of a step are never reported (noise is measured anyway; "
        "unset: the session's spec.analysis in a session folder, else 4)",
    )
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help=f"exit 0 even when some rank could not be analysed (otherwise {EXIT_PARTIAL})",
    )
    return p


def analyze_main(argv: list[str]) -> int:
    started = time.perf_counter()
    args = analyze_parser().parse_args(argv)
    from stepscope_analyzer.gc_pause import paused

    with paused():
        from stepscope_analyzer.commands.analyze_command import run

    try:
        return run(args, started)
    finally:
        # The interpreter's exit collects garbage over every object still alive (modules, the analysis), after
        # the report is written. Frozen objects are left out of those collections; exit handlers still run.
        gc.freeze()


def job_main(argv: list[str]) -> int:
    """`stepscope analyzer-job` (session_job.py), imported only for that command once its arguments parse."""
    from stepscope_analyzer.commands.job_args import job_parser

    job_parser().parse_args(argv)  # `--help` and usage errors exit here
    from stepscope_analyzer.commands.session_job import job_main as run

    return run(argv)
