"""The analyzer's outputs on every recorded trace, written to a folder, or compared with a folder written before.

Speed work on the parser and the per-rank analyses must not change a single output. This script writes, for every
job folder of tests/analyzer_job/fixtures (cpu_jobs, gpu_jobs, demo_sessions) the Report that `stepscope analyze`
makes, and for every single trace (tests/analyzer_job/fixtures, the shared HTA traces) the rank's summary, each as
JSON; `--compare` writes them again and lists every file that differs, byte for byte. Run it once with the native
kernels and once without (`--python`): both must match the same snapshot. `--kept` compares a report on what it
keeps: the fields of the snapshot's report (fields added since are left aside) and, of its ranks, those the report
holds in full (every rank's numbers are in ranks.csv.gz beside it); `--reports-only` leaves the single traces out.

Usage: python bench/same_reports.py --write DIR      (before the change)
       python bench/same_reports.py --compare DIR    (after it; exit status 1 on any difference)
       python bench/same_reports.py --compare DIR --kept --reports-only
       add --python to run the parser and the interval kernels on their pure-Python paths
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "analyzer_job" / "fixtures"
SHARED = ROOT.parent / "shared" / "data" / "traces"
JOB_GROUPS = ("cpu_jobs", "gpu_jobs", "demo_sessions")
FIXED_TIME = datetime(2026, 1, 1, tzinfo=UTC)
"""every report's generated_at (the one field that depends on when it was made)"""


def job_folders() -> list[Path]:
    return sorted(p for g in JOB_GROUPS for p in (FIXTURES / g).iterdir() if p.is_dir())


def single_traces() -> list[Path]:
    found = [*FIXTURES.glob("*.json.gz"), *(SHARED / "hta").glob("*.json.gz"), *SHARED.glob("*.json.gz")]
    return sorted({p.resolve() for p in found if "source" not in p.name})


def report_json(folder: Path) -> str:
    from stepscope_analyzer.ranks.pipeline import discover
    from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
    from stepscope_analyzer.ranks.two_pass import gather_all
    from stepscope_analyzer.reduce.reduction import flight_recorder_dumps, reduce_outcomes

    store = LocalStore()
    layout = discover(store, location_of(str(folder)))
    gathered = gather_all(store, layout)
    dumps = flight_recorder_dumps(store, layout)
    report = reduce_outcomes(
        gathered.outcomes, include_missing=layout.session, notes=layout.notes, flight_recorder=dumps,
        table=gathered.table, released_errors=gathered.errors,
    )  # fmt: skip
    return report.model_copy(update={"generated_at": FIXED_TIME}).model_dump_json(indent=1)


def summary_json(trace: Path) -> str:
    from stepscope_analyzer.analyses import summarize_trace

    return summarize_trace(trace).model_dump_json(indent=1)


@contextlib.contextmanager
def python_paths(on: bool) -> Iterator[None]:
    """The parser's and the interval kernels' pure-Python paths, where ``on``."""
    if not on:
        yield
        return
    from stepscope_analyzer.analyses import interval_kernels
    from stepscope_analyzer.parse import native

    names = ("_kernel", "_coverage", "_pieces", "_first_level", "_name_times", "_coarsen", "_children")
    saved = {n: getattr(interval_kernels, n) for n in names}
    try:
        for n in names:
            setattr(interval_kernels, n, None)
        with native.enabled(False):
            yield
    finally:
        for n, kernel in saved.items():
            setattr(interval_kernels, n, kernel)


def kept(before: str, now: str) -> tuple[str, str]:
    """Both reports on what the newer keeps: the older's fields, the ranks the newer holds in full (paths to the
    fixtures taken from where each checkout lies)."""
    where = re.compile(r"file://[^\"]*?/tests/analyzer_job/fixtures/")
    old, new = (json.loads(where.sub("file://<fixtures>/", text)) for text in (before, now))
    new = {k: v for k, v in new.items() if k in old}
    ranks = {r["rank"] for r in new.get("ranks", [])}
    old["ranks"] = [r for r in old.get("ranks", []) if r["rank"] in ranks]
    return json.dumps(old, indent=1, sort_keys=True), json.dumps(new, indent=1, sort_keys=True)


def outputs(reports_only: bool = False) -> Iterator[tuple[str, str]]:
    for folder in job_folders():
        yield f"report__{folder.parent.name}__{folder.name}.json", report_json(folder)
    if reports_only:
        return
    for trace in single_traces():
        yield f"rank__{trace.parent.name}__{trace.name.removesuffix('.json.gz')}.json", summary_json(trace)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, metavar="DIR")
    mode.add_argument("--compare", type=Path, metavar="DIR")
    parser.add_argument("--python", action="store_true", help="pure-Python parser and interval kernels")
    parser.add_argument("--kept", action="store_true", help="compare reports on what the newer one keeps")
    parser.add_argument("--reports-only", action="store_true", help="the job folders' reports only")
    args = parser.parse_args()
    differ: list[str] = []
    count = 0
    with python_paths(args.python):
        for name, text in outputs(args.reports_only):
            count += 1
            if args.write:
                args.write.mkdir(parents=True, exist_ok=True)
                (args.write / name).write_text(text)
                continue
            before = args.compare / name
            old, new = (before.read_text() if before.exists() else None), text
            if old is not None and args.kept and name.startswith("report__"):
                old, new = kept(old, text)
            if old != new:
                differ.append(name)
                print(f"DIFFERS: {name}", flush=True)
    print(f"{count} outputs, {len(differ)} differ" + ("" if args.compare else f", written to {args.write}"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
