"""`stepscope analyze`'s work, once its arguments are parsed (cli.py starts the workers' fork server first)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from stepscope_analyzer.cli import EXIT_BAD_SOURCE, EXIT_NO_TRACES, EXIT_OK, EXIT_PARTIAL, progress
from stepscope_analyzer.diagnosis import DiagnosisConfig
from stepscope_analyzer.output_files import write_files
from stepscope_analyzer.pipeline import discover, flight_recorder_dumps, reduce_outcomes, summarize_all
from stepscope_analyzer.report import html_bytes, model_json_bytes, with_trace_links
from stepscope_analyzer.storage_io import StorageError, location_of, open_store
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import RankStatus
from stepscope_contract.storage import REPORT_HTML, REPORT_JSON, AddressingStyle, StorageUriError
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials


def run(args: argparse.Namespace, started: float) -> int:
    """The command for parsed arguments; `started`: when the command began (the report's analysis time)."""
    try:
        location = location_of(args.source)
        connection = Connection(args.endpoint, args.region, AddressingStyle(args.addressing_style))
        store = open_store(location, connection, Credentials.from_env())
        progress(f"stepscope analyze: reading {location.uri}")
        layout = discover(store, location)
    except (StorageUriError, StorageError) as exc:
        print(f"stepscope analyze: {exc}", file=sys.stderr)
        return EXIT_BAD_SOURCE
    if not layout.inputs:
        print(f"stepscope analyze: no traces found in {location.uri}", file=sys.stderr)
        return EXIT_NO_TRACES
    if layout.session:
        progress(f"found {len(layout.inputs)} rank(s) (session folder)")
    else:
        progress(f"found {len(layout.inputs)} candidate trace file(s) (folder of traces)")
    for note in layout.notes:
        progress(note)
    outcomes = summarize_all(store, layout, top_n=args.top_n, progress=progress)
    if not any(o.skipped is None for o in outcomes):
        print(f"stepscope analyze: no traces found in {location.uri}", file=sys.stderr)
        return EXIT_NO_TRACES
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
