"""`stepscope analyze` (local runs) and the entry of `stepscope analyzer-job` (see job.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from stepscope_analyzer.diagnosis import DiagnosisConfig
from stepscope_analyzer.pipeline import discover, flight_recorder_dumps, reduce_outcomes, summarize_all
from stepscope_analyzer.report import html_bytes, model_json_bytes, with_trace_links
from stepscope_analyzer.storage_io import StorageError, location_of, open_store
from stepscope_contract.session import AddressingStyle
from stepscope_contract.storage import REPORT_HTML, REPORT_JSON, StorageUriError
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def analyze_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stepscope analyze",
        description="Analyse Kineto traces of a distributed PyTorch job: a stepscope session folder "
        "(traces/rank<R>.pt.trace.json.gz, or the first layout's ranks/<rank>/...) or a folder of "
        "*.pt.trace.json[.gz] files, local or in object storage.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("source", help="folder, file, file:///path, s3://bucket/prefix or oss://bucket/prefix")
    p.add_argument("-o", "--output", default="stepscope-report", help="output folder")
    p.add_argument("--endpoint", default=None, help="S3-compatible endpoint URL (MinIO, OSS; unset: AWS)")
    p.add_argument("--region", default=None, help="object store region (unset: the environment's)")
    p.add_argument(
        "--addressing-style", default="auto", choices=[s.value for s in AddressingStyle], help="S3 addressing style"
    )
    p.add_argument("--top-n", type=int, default=50, help="top kernels/functions kept per rank")
    p.add_argument("--outlier-threshold", type=float, default=3.5, help="robust z-score of an outlier rank")
    p.add_argument("--min-slowdown-percent", type=float, default=5.0, help="smallest reported slowdown, %% of a step")
    return p


def analyze_main(argv: list[str]) -> int:
    args = analyze_parser().parse_args(argv)
    started = time.perf_counter()
    try:
        location = location_of(args.source)
        connection = Connection(args.endpoint, args.region, AddressingStyle(args.addressing_style))
        store = open_store(location, connection, Credentials.from_env())
        _progress(f"stepscope analyze: reading {location.uri}")
        layout = discover(store, location)
    except (StorageUriError, StorageError) as exc:
        print(f"stepscope analyze: {exc}", file=sys.stderr)
        return 2
    if not layout.inputs:
        print(f"stepscope analyze: no traces found in {location.uri}", file=sys.stderr)
        return 1
    kind = "session folder" if layout.session else "folder of traces"
    _progress(f"found {len(layout.inputs)} rank(s) ({kind})")
    outcomes = summarize_all(store, layout, top_n=args.top_n, progress=_progress)
    config = DiagnosisConfig(outlier_threshold=args.outlier_threshold, min_slowdown_percent=args.min_slowdown_percent)
    dumps = flight_recorder_dumps(store, layout)
    report = reduce_outcomes(
        outcomes, config=config, started=started, include_missing=layout.session, flight_recorder=dumps
    )
    out = Path(args.output)
    report = with_trace_links(report, location_of(str(out.resolve())))
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / REPORT_JSON).write_bytes(model_json_bytes(report))
        (out / REPORT_HTML).write_bytes(html_bytes(report))
    except OSError as exc:
        print(f"stepscope analyze: cannot write the report to {out}: {exc}", file=sys.stderr)
        return 2
    _progress(f"analysed {len(report.ranks)} rank(s) in {time.perf_counter() - started:.2f} s")
    print(report.diagnosis.verdict)
    print(f"report: {(out / REPORT_HTML).resolve()}")
    print(f"json:   {(out / REPORT_JSON).resolve()}")
    return 0


def job_main(argv: list[str]) -> int:
    """`stepscope analyzer-job`: imported lazily, it needs the kubernetes client."""
    from stepscope_analyzer.job import job_main as run

    return run(argv)
