"""The second half of `stepscope analyze` (analyze_command): every rank's outcome -> the diagnosis, the report
files and the command's output and exit status."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from stepscope_analyzer.cli import EXIT_BAD_SOURCE, EXIT_OK, EXIT_PARTIAL, progress
from stepscope_analyzer.diagnosis import DiagnosisConfig
from stepscope_analyzer.discovery import Layout
from stepscope_analyzer.output_files import write_files
from stepscope_analyzer.pipeline import RankOutcome
from stepscope_analyzer.reduction import flight_recorder_dumps, reduce_outcomes
from stepscope_analyzer.report import html_bytes, model_json_bytes, with_trace_links
from stepscope_analyzer.storage_io import Store, location_of
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import RankStatus
from stepscope_contract.storage import REPORT_HTML, REPORT_JSON


def finish(args: argparse.Namespace, store: Store, layout: Layout, outcomes: list[RankOutcome], started: float) -> int:
    """Diagnose, write the report to `args.output`, print the verdict; the command's exit status."""
    config = DiagnosisConfig(outlier_threshold=args.outlier_threshold, min_slowdown_percent=args.min_slowdown_percent)
    dumps = flight_recorder_dumps(store, layout)
    report = reduce_outcomes(
        outcomes,
        config=config,
        started=started,
        include_missing=layout.session,
        notes=layout.notes,
        flight_recorder=dumps,
    )
    out = Path(args.output)
    report = with_trace_links(report, location_of(str(out.resolve())))
    try:
        write_files(out, {REPORT_JSON: model_json_bytes(report), REPORT_HTML: html_bytes(report)})
    except OSError as exc:
        print(f"stepscope analyze: cannot write the report to {out}: {exc}", file=sys.stderr)
        return EXIT_BAD_SOURCE
    progress(f"analysed {len(report.ranks)} rank(s) in {time.perf_counter() - started:.2f} s")
    print(report.diagnosis.verdict)
    print(f"report: {(out / REPORT_HTML).resolve()}")
    print(f"json:   {(out / REPORT_JSON).resolve()}")
    failed = sorted(r.rank for r in report.ranks if r.status in (RankStatus.ERROR, RankStatus.MISSING))
    if failed and not args.allow_partial:
        listed = format_rank_set(failed)
        print(f"stepscope analyze: rank(s) {listed} could not be analysed (exit {EXIT_PARTIAL}; --allow-partial "
              "accepts a partial analysis)", file=sys.stderr)  # fmt: skip
        return EXIT_PARTIAL
    return EXIT_OK


__all__ = ["finish"]
