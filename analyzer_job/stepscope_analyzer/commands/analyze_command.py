"""`stepscope analyze`'s work, once its arguments are parsed (cli.py imports this module then).

Three steps, so that the workers start sooner: this module imports only what finds the traces (storage, discovery);
then the pipeline, which reads the source and hands the ranks to the workers, forked once it has imported the
parser and the analyses (workers/forking: a job with traces enough for a pool), importing neither the diagnosis nor
the report; the last half (analyze_finish: reduce, diagnose, write the report, with jinja2's imports) is imported
while the workers parse the first ranks. The collector is paused during each import (gc_pause).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING

from stepscope_analyzer import phases
from stepscope_analyzer.commands.console import EXIT_BAD_SOURCE, EXIT_NO_TRACES, progress
from stepscope_analyzer.gc_pause import paused
from stepscope_analyzer.ranks.discovery import Layout, discover
from stepscope_analyzer.ranks.storage_io import StorageError, Store, location_of, open_store
from stepscope_contract.storage import StorageUriError
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials
from stepscope_storage.failure_fix import with_fix

if TYPE_CHECKING:
    from stepscope_contract.analysis_documents import SessionDocument

FINISH = "stepscope_analyzer.commands.analyze_finish"


def _import_finish() -> None:
    """The finishing half, the report's validators (built on first use: contract.deferred) and numpy.ma (which the
    diagnosis' first numpy.median imports; the ranks never do), loaded while the workers parse the first ranks."""
    with paused():
        importlib.import_module(FINISH)
        importlib.import_module("numpy.ma")
        from stepscope_contract.deferred import build_now
        from stepscope_contract.report import Report

        build_now(Report)


def run(args: argparse.Namespace, started: float) -> int:
    """The command for parsed arguments; `started`: when the command began (the report's analysis time)."""
    phases.mark("imported")
    try:
        location = location_of(args.source)
        connection = Connection.from_args(args)
        store = open_store(location, connection, Credentials.from_env())
        progress(f"stepscope analyze: reading {location.uri}")
        layout = discover(store, location)
    except (StorageUriError, StorageError) as exc:
        print(f"stepscope analyze: {with_fix(exc)}", file=sys.stderr)
        return EXIT_BAD_SOURCE
    if not layout.inputs:
        print(f"stepscope analyze: no traces found in {location.uri}", file=sys.stderr)
        return EXIT_NO_TRACES
    return _analyze(args, started, store, layout, location.uri)


def _session_document(store: Store, source: str) -> SessionDocument | None:
    """The session folder's session.json (its models imported only for a session: a folder of traces has none)."""
    with paused():
        from stepscope_analyzer.ranks.session_file import session_document
    return session_document(store, source)


def _analyze(args: argparse.Namespace, started: float, store: Store, layout: Layout, uri: str) -> int:
    with paused():
        from stepscope_analyzer.ranks.two_pass import gather_all

    if layout.session:
        progress(f"found {len(layout.inputs)} rank(s) (session folder)")
    else:
        progress(f"found {len(layout.inputs)} candidate trace file(s) (folder of traces)")
    for note in layout.notes:
        progress(note)
    document = _session_document(store, args.source) if layout.session else None
    capture_id = document.capture_id if document is not None else None  # node summaries must be of this capture
    phases.mark("ranks began")
    gathered = gather_all(
        store, layout, top_n=args.top_n, progress=progress, while_waiting=_import_finish, capture_id=capture_id
    )
    phases.mark("ranks done")
    if not any(o.skipped is None for o in gathered.outcomes):
        print(f"stepscope analyze: no traces found in {uri}", file=sys.stderr)
        return EXIT_NO_TRACES
    from stepscope_analyzer.commands.analyze_finish import finish  # loaded already unless there were no workers

    try:
        return finish(args, store, layout, gathered, started)
    finally:
        phases.report()
