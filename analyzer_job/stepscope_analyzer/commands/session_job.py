"""`stepscope analyzer-job --session-json DOC [--mode all|map|reduce|delete] [--shards N] [--outcome-file PATH]`.

The analyzer Job of a ProfileSession, storage in and storage out: it needs no Kubernetes API. DOC is the session as
the operator accepted it (stepscope_contract.analysis_documents.SessionDocument); the Job writes it into the session
folder (session.json) and from then on reads it from there, as `stepscope analyze` of the folder does. Modes:
- map: summarises ranks i::n (i from JOB_COMPLETION_INDEX) into summaries/rank-<r>.json (contract RankReport),
  and their compact numbers into summaries/facts-<i>-of-<n>.json (ranks/facts.py: the shard's partial);
- reduce: merges the n partials into the ranks table, reads again in full the summaries of the ranks the diagnosis
  compares (ranks/candidates.py) and of the ranks not analysed, diagnoses, writes report/{report.json,
  ranks.csv.gz, report.html, outcome.json}; without every partial, it reads every summary once (ranks/two_pass.py);
- all: both in one pod;
- delete: the cleanup Job of a session being deleted (cleanup.py): its folder, recomputed from DOC.
A rank whose node summarised it (traces/rank<R>/summary.json, node_summaries.py) is not parsed again.
The outcome (AnalysisOutcome: the status summary, the report's URLs, whether a report was written and why not, the
Regressed condition) also goes to --outcome-file: the operator gives the path as the container's termination
message, reads it when the Job ends and writes the session's status. Failures exit non-zero with a message on stderr
and an outcome that says why.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import ValidationError

from stepscope_analyzer import tool_version
from stepscope_analyzer.commands.gate_step import run_gate, without_gate, write_index_entry
from stepscope_analyzer.commands.job_args import job_parser
from stepscope_analyzer.commands.report_file import store_report_json
from stepscope_analyzer.diagnosis import DiagnosisConfig
from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.diff.step_samples import median_and_p90
from stepscope_analyzer.evidence.files import evidence_files
from stepscope_analyzer.ranks.candidates import FULL_COMPARE, compared_rows
from stepscope_analyzer.ranks.facts import FactsTable
from stepscope_analyzer.ranks.pipeline import (
    Layout,
    RankInput,
    RankOutcome,
    discover,
    each_outcome,
    read_ahead,
    read_from_node,
    summarise,
)
from stepscope_analyzer.ranks.python_stacks_io import load_python_stacks
from stepscope_analyzer.ranks.rank_reading import read_rank
from stepscope_analyzer.ranks.storage_io import StorageError, Store, open_store, read_bounded
from stepscope_analyzer.ranks.two_pass import Gathered, gather, gather_all
from stepscope_analyzer.reduce.reduction import flight_recorder_dumps, reduce_outcomes
from stepscope_analyzer.report import html_bytes, model_json_bytes, with_trace_links
from stepscope_contract.analysis_documents import (
    MAX_SESSION_DOCUMENT_BYTES,
    AnalysisOutcome,
    RegressedVerdict,
    SessionDocument,
    termination_message,
)
from stepscope_contract.report import CaptureInfo, RankError, RankReport, RankStatus, Report, SessionInfo
from stepscope_contract.session import ReportSummary
from stepscope_contract.session_folder import session_folder
from stepscope_contract.status_wire import MAX_MESSAGE
from stepscope_contract.storage import (
    OUTCOME_FILE,
    RANKS_TABLE,
    REPORT_HTML,
    REPORT_JSON,
    SESSION_FILE,
    StorageLocation,
    facts_key,
    report_location,
    summary_key,
)
from stepscope_storage.credentials import Credentials

READ_WORKERS = 16


class JobError(RuntimeError):
    """The analyzer Job cannot go on; the message says why."""


def _log(message: str) -> None:
    print(f"stepscope analyzer-job: {message}", file=sys.stderr, flush=True)


def open_session(document: SessionDocument) -> tuple[StorageLocation, Store]:
    """The session's folder (recomputed from the accepted spec, namespace, name and uid) and its store."""
    spec = document.spec
    location = session_folder(spec, document.namespace, document.name, document.uid)
    return location, open_store(location, spec.storage, Credentials.from_env())


def write_session_document(store: Store, location: StorageLocation, document: SessionDocument) -> str:
    return store.write(location.key(SESSION_FILE), document.to_json().encode(), "application/json")


def read_session_document(store: Store, location: StorageLocation) -> SessionDocument:
    """The session document of a folder; JobError when there is none or it does not read."""
    try:
        data = store.read(location.key(SESSION_FILE), most=MAX_SESSION_DOCUMENT_BYTES)
        return SessionDocument.from_json(data)
    except (StorageError, ValueError) as exc:
        raise JobError(f"no usable {SESSION_FILE} in {location.uri}: {exc}") from exc


def with_step_numbers(summary: ReportSummary, report: Report) -> ReportSummary:
    """The job's median and p90 step time, and the slowest rank's slowdown, in the summary where the diagnosis left
    them out."""
    update: dict[str, float] = {}
    median, p90 = median_and_p90(report)
    if summary.median_step_ms is None and median > 0:
        update.update(median_step_ms=round(median / 1000, 3), p90_step_ms=round(p90 / 1000, 3))
    slow = report.diagnosis.slow_ranks
    if summary.slowdown_percent is None and slow:
        update["slowdown_percent"] = round(slow[0].slowdown_pct, 1)
    return summary.model_copy(update=update) if update else summary


def shard(layout: Layout, index: int, shards: int) -> list[RankInput]:
    """Ranks i::n of the session (sorted by rank)."""
    if shards < 1 or not 0 <= index < shards:
        raise JobError(f"shard index {index} is outside 0..{shards - 1}")
    return layout.inputs[index::shards]


def run_map(
    store: Store,
    location: StorageLocation,
    layout: Layout,
    *,
    index: int,
    shards: int,
    top_n: int,
    capture_id: str | None = None,
) -> int:
    """Summarise this shard's ranks into summaries/rank-<r>.json, each written (and let go) as soon as it is done,
    their compact numbers (the shard's partial) into summaries/facts-<index>-of-<shards>.json; how many were
    written. `capture_id`: the session's (node summaries of another capture are refused)."""
    part = Layout(session=layout.session, inputs=shard(layout, index, shards))
    _log(f"map shard {index}/{shards}: {len(part.inputs)} of {len(layout.inputs)} rank(s)")
    table = FactsTable()
    for o in each_outcome(store, part, top_n=top_n, progress=_log, capture_id=capture_id):
        _write_summary(store, location, o)
        if o.skipped is None:
            table.add(o.summary)
    store.write(facts_key(location, index, shards), table.to_json(), "application/json")
    return len(table)


def _write_summary(store: Store, location: StorageLocation, outcome: RankOutcome) -> None:
    summary = outcome.summary
    store.write(summary_key(location, summary.rank), model_json_bytes(summary, indent=None), "application/json")


def _summary_reader(store: Store, location: StorageLocation) -> Callable[[RankInput], RankOutcome]:
    """Reads one rank's summary as the map step left it; a rank without one is an error; a hung rank gets its
    stacks back."""

    def one(inp: RankInput) -> RankOutcome:
        assert inp.rank is not None
        key = summary_key(location, inp.rank)
        try:
            summary = RankReport.model_validate_json(read_bounded(store, key, "max_summary_bytes"))
        except (StorageError, ValidationError, ValueError) as exc:
            message = f"no usable summary from the map step ({str(exc)[:300]})"
            outcome = RankOutcome(RankReport(rank=inp.rank, status=RankStatus.ERROR, error=message))
        else:
            if summary.status is RankStatus.HUNG:
                return summarise(read_rank(store, inp, with_trace=False), store)  # manifest and stacks only
            outcome = RankOutcome(summary)
        s = outcome.summary
        if s.status is not RankStatus.OK:
            outcome.errors.append(RankError(rank=s.rank, source=s.trace_uri or "", message=s.error or s.status.value))
        return outcome

    return one


def shard_tables(store: Store, location: StorageLocation, shards: int) -> FactsTable | None:
    """The map shards' partials merged into the ranks table (None: a shard left none, or one does not read)."""
    table = FactsTable()
    for index in range(max(1, shards)):
        try:
            table.extend(
                FactsTable.from_json(read_bounded(store, facts_key(location, index, shards), "max_summary_bytes"))
            )
        except (StorageError, ValueError) as exc:
            _log(f"map shard {index}'s numbers do not read ({str(exc)[:200]}): every summary is read instead")
            return None
    return table


def read_summaries(
    store: Store, location: StorageLocation, layout: Layout, *, shards: int = 1, budget: int = FULL_COMPARE
) -> Gathered:
    """The map step's results as the reduce holds them: from the shards' partials, the ranks table, and read in full
    the ranks not analysed, the ranks the diagnosis compares and any rank no partial holds; without every partial,
    every summary read once (two_pass.gather)."""
    one = _summary_reader(store, location)
    table = shard_tables(store, location, shards)
    with ThreadPoolExecutor(READ_WORKERS) as pool:
        if table is None:
            found = enumerate(read_ahead(pool, one, layout.inputs, 2 * READ_WORKERS))
            return gather(found, layout.inputs, one, budget=budget, reread_all=True)
        compared = set(compared_rows(table, budget))
        wanted = {
            table.ints["rank"][i] for i in range(len(table)) if i in compared or table.status(i) is not RankStatus.OK
        }
        known = set(table.ints["rank"])
        inputs = [inp for inp in layout.inputs if inp.rank in wanted or inp.rank not in known]
        outcomes = list(read_ahead(pool, one, inputs, 2 * READ_WORKERS))
    return Gathered(table, outcomes, sampled=len(compared) < len(table.ok_rows()))


def analyze_session(
    store: Store,
    location: StorageLocation,
    *,
    mode: str = "all",
    top_n: int = 50,
    started: float | None = None,
    shards: int = 1,
) -> AnalysisOutcome:
    """A session folder in, its report out: reads session.json and the ranks' files, writes report/{report.json,
    report.html, outcome.json} (and the sessions-index entry); the outcome. JobError when there is nothing to
    analyse. `mode`: all (summarise every rank here) or reduce (read the map step's summaries)."""
    started = time.perf_counter() if started is None else started
    document = read_session_document(store, location)
    spec = document.spec
    layout = discover(store, location)
    if not layout.session or not layout.inputs:
        raise JobError(f"no rank's files under {location.uri}/traces/ (or the first layout's ranks/)")
    if mode == "all":
        stored = _summary_reader(store, location)

        def keep(o: RankOutcome) -> None:  # as the map step leaves them: pass two (or a later reduce) reads them
            if not o.from_node and o.skipped is None:  # the others' summaries are beside their traces already
                _write_summary(store, location, o)

        def again(inp: RankInput) -> RankOutcome | None:
            from_node = read_from_node(store, inp, top_n, document.capture_id)[0] if inp.node_summary_key else None
            return from_node or stored(inp)

        gathered = gather_all(
            store, layout, top_n=top_n, progress=_log, on_outcome=keep, reread=again, capture_id=document.capture_id
        )
    else:
        gathered = read_summaries(store, location, layout, shards=shards)
    info = SessionInfo(
        namespace=document.namespace, name=document.name, uid=document.uid, capture_id=document.capture_id
    )
    dumps = flight_recorder_dumps(store, layout)
    reducing = time.perf_counter()
    report = reduce_outcomes(
        gathered.outcomes, config=DiagnosisConfig.from_spec(spec.analysis), session=info, started=started,
        include_missing=True, flight_recorder=dumps, table=gathered.table, released_errors=gathered.errors,
        python_stacks=lambda ranks: load_python_stacks(store, layout, ranks),
    )  # fmt: skip
    _log(f"{len(gathered.table)} rank(s) reduced in {time.perf_counter() - reducing:.2f} s")
    where = report_location(location)
    update = {"capture": CaptureInfo.from_spec(spec.capture), "ranks_table": RANKS_TABLE}
    report = with_trace_links(report, where).model_copy(update=update)
    gate = run_gate(spec, document.namespace, store, where, report, log=_log)
    if gate is not None:
        report = gate.into_report(report)
    writing = time.perf_counter()
    evidence = evidence_files(store, layout, report)
    report = evidence.report
    for name, data in evidence.files.items():  # beside the report (the merged trace in a folder of its own)
        *folders, file = name.split("/")
        kind = "application/gzip" if file.endswith(".gz") else "application/json"
        store.write(where.child(*folders).key(file), data, kind)
    json_url = store_report_json(report, store, where.key(REPORT_JSON))
    store.write(where.key(RANKS_TABLE), gathered.table.csv_gz_bytes(), "application/gzip")
    html_url = store.write(where.key(REPORT_HTML), html_bytes(report), "text/html; charset=utf-8")
    _log(f"report.json and report.html stored in {time.perf_counter() - writing:.2f} s")
    summary = with_step_numbers(build_status_summary(report), report)
    regressed = None
    if gate is None:
        summary = without_gate(summary)
    else:
        summary = gate.into_summary(summary)
        value, reason, text = gate.condition
        regressed = RegressedVerdict(status=value, reason=reason, message=text[:MAX_MESSAGE])
    outcome = AnalysisOutcome(
        ok=True, message=(summary.verdict or "")[:MAX_MESSAGE], summary=summary, report_url=html_url,
        report_json_url=json_url, regressed=regressed, analyzer_version=tool_version(),
    )  # fmt: skip
    write_outcome(store, location, outcome)
    write_index_entry(
        spec, report, store, namespace=document.namespace, name=document.name, uid=document.uid, folder=location,
        report_json=json_url, log=_log,
    )  # fmt: skip
    _log(f"report written to {html_url}; {report.diagnosis.verdict}")
    return outcome


def write_outcome(store: Store, location: StorageLocation, outcome: AnalysisOutcome) -> str:
    data = outcome.model_dump_json(by_alias=True, exclude_none=True, indent=1).encode()
    return store.write(report_location(location).key(OUTCOME_FILE), data, "application/json")


def hand_back(path: str | None, outcome: AnalysisOutcome) -> None:
    """The outcome as the container's termination message (the operator reads it when the Job ends)."""
    if not path:
        return
    try:
        Path(path).write_text(termination_message(outcome), encoding="utf-8")
    except OSError as exc:
        _log(f"cannot write the outcome to {path}: {exc}")


def _run(args: argparse.Namespace, document: SessionDocument) -> AnalysisOutcome | None:
    started = time.perf_counter()
    location, store = open_session(document)
    _log(f"session {document.namespace}/{document.name}: storage {location.uri}, mode {args.mode}")
    write_session_document(store, location, document)
    if args.mode != "map":
        return analyze_session(store, location, mode=args.mode, top_n=args.top_n, started=started, shards=args.shards)
    layout = discover(store, location)
    if not layout.session or not layout.inputs:
        raise JobError(f"no rank's files under {location.uri}/traces/ (or the first layout's ranks/)")
    index = args.index if args.index is not None else int(os.environ.get("JOB_COMPLETION_INDEX", "0"))
    run_map(store, location, layout, index=index, shards=args.shards, top_n=args.top_n,
            capture_id=document.capture_id)  # fmt: skip
    return None


def _failed(args: argparse.Namespace, document: SessionDocument, exc: Exception) -> AnalysisOutcome:
    outcome = AnalysisOutcome(
        ok=False, message=f"analysis failed: {exc}"[:MAX_MESSAGE], analyzer_version=tool_version()
    )
    if args.mode != "map":
        try:
            location, store = open_session(document)
            write_outcome(store, location, outcome)
        except (StorageError, ValueError) as write_exc:
            _log(f"could not write the outcome to storage either: {write_exc}")
    return outcome


def _delete(document: SessionDocument) -> int:
    from stepscope_analyzer.commands.cleanup import CleanupRefused, run_delete

    try:
        run_delete(document, _log)
    except CleanupRefused as exc:
        _log(f"nothing deleted: {exc}")
        return 3
    except (StorageError, ValueError) as exc:
        _log(f"delete failed: {exc}")
        return 1
    return 0


def job_main(argv: list[str]) -> int:
    args = job_parser().parse_args(argv)
    try:
        document = SessionDocument.from_json(args.session_json)
    except ValueError as exc:
        _log(f"--session-json: {exc}")
        hand_back(args.outcome_file, AnalysisOutcome(ok=False, message=f"analysis failed: --session-json: {exc}"))
        return 2
    if args.mode == "delete":
        return _delete(document)
    try:
        outcome = _run(args, document)
    except (JobError, StorageError, ValueError) as exc:
        _log(f"failed: {exc}")
        hand_back(args.outcome_file, _failed(args, document, exc))
        return 1
    if outcome is not None:
        hand_back(args.outcome_file, outcome)
    return 0
