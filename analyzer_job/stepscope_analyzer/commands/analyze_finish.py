"""The second half of `stepscope analyze` (analyze_command): every rank's outcome -> the diagnosis, the report
files and the command's output and exit status.

A session folder that holds the session as the operator accepted it (session.json, written by the analyzer Job) is
analysed as the Job analysed it: the session's identity, what it asked to record and its spec.analysis (unless the
command line says otherwise) go into the report."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope_analyzer import phases
from stepscope_analyzer.commands.console import EXIT_BAD_SOURCE, EXIT_OK, EXIT_PARTIAL, progress
from stepscope_analyzer.commands.report_file import save_report_json
from stepscope_analyzer.diagnosis import DiagnosisConfig
from stepscope_analyzer.evidence.files import evidence_files
from stepscope_analyzer.output_files import write_files
from stepscope_analyzer.ranks.discovery import Layout
from stepscope_analyzer.ranks.session_file import session_document
from stepscope_analyzer.ranks.storage_io import Store, location_of
from stepscope_analyzer.ranks.two_pass import Gathered
from stepscope_analyzer.reduce.reduction import flight_recorder_dumps, reduce_outcomes
from stepscope_analyzer.report import html_bytes, with_trace_links
from stepscope_contract.analysis_documents import SessionDocument
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import CaptureInfo, RankStatus, SessionInfo
from stepscope_contract.storage import RANKS_TABLE, REPORT_HTML, REPORT_JSON

if TYPE_CHECKING:
    from stepscope_analyzer.analyses.folded_stacks import FoldedStacks
    from stepscope_contract.report import RankError


def _python_stacks(store: Store, layout: Layout, ranks: list[int]) -> tuple[dict[int, FoldedStacks], list[RankError]]:
    """The named ranks' sampled Python stacks (their reader loads the analyses: imported only when asked)."""
    from stepscope_analyzer.ranks.python_stacks_io import load_python_stacks

    return load_python_stacks(store, layout, ranks)


def diagnosis_config(args: argparse.Namespace, document: SessionDocument | None) -> DiagnosisConfig:
    """The command line's thresholds, else the session's spec.analysis, else the defaults."""
    base = DiagnosisConfig.from_spec(document.spec.analysis if document is not None else None)
    update = {
        k: v
        for k, v in (("outlier_threshold", args.outlier_threshold), ("min_slowdown_percent", args.min_slowdown_percent))
        if v is not None
    }
    return replace(base, **update) if update else base


def finish(args: argparse.Namespace, store: Store, layout: Layout, gathered: Gathered, started: float) -> int:
    """Diagnose, write the report (report.json, ranks.csv.gz, report.html) to `args.output`, print the verdict; the
    command's exit status."""
    document = session_document(store, args.source) if layout.session else None
    dumps = flight_recorder_dumps(store, layout)
    session = None
    if document is not None:
        session = SessionInfo(namespace=document.namespace, name=document.name, uid=document.uid,
                              capture_id=document.capture_id)  # fmt: skip
    report = reduce_outcomes(
        gathered.outcomes,
        table=gathered.table,
        released_errors=gathered.errors,
        config=diagnosis_config(args, document),
        session=session,
        started=started,
        include_missing=layout.session,
        notes=layout.notes,
        flight_recorder=dumps,
        python_stacks=lambda ranks: _python_stacks(store, layout, ranks),
    )
    phases.mark("diagnosed")
    out = Path(args.output)
    report = with_trace_links(report, location_of(str(out.resolve()))).model_copy(update={"ranks_table": RANKS_TABLE})
    if document is not None:
        report = report.model_copy(update={"capture": CaptureInfo.from_spec(document.spec.capture)})
    evidence = evidence_files(store, layout, report)
    report = evidence.report
    try:
        out.mkdir(parents=True, exist_ok=True)
        save_report_json(report, out / REPORT_JSON)
        gathered.table.save_csv_gz(out / RANKS_TABLE)
        write_files(out, {**evidence.files, REPORT_HTML: html_bytes(report)})
        phases.mark("report written")
    except OSError as exc:
        print(f"stepscope analyze: cannot write the report to {out}: {exc}", file=sys.stderr)
        return EXIT_BAD_SOURCE
    progress(f"analysed {len(gathered.table)} rank(s) in {time.perf_counter() - started:.2f} s")
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
