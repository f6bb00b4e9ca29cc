"""One side of a diff as a contract Report: an existing report.json, or traces analysed through the pipeline
(a session folder, a folder of traces or one trace, local or in object storage: whatever `stepscope analyze` takes).

Which one: a source whose last segment ends in "report.json" is a report; otherwise its traces are analysed; a
folder with no traces but a report (``report.json`` directly inside, or a session's ``report/report.json``) is read
as that report, so a session whose traces were deleted can still be a baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from pydantic import ValidationError

from stepscope_analyzer.diff.defaults import DIFF_TOP_N
from stepscope_analyzer.ranks.storage_io import StorageError, Store, TooLargeError, location_of, open_store
from stepscope_contract.report import Report
from stepscope_contract.storage import REPORT_JSON, StorageLocation, StorageUriError, report_location
from stepscope_storage import Credentials, EndpointSettings

MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_ERROR_CHARS = 400

Progress = Callable[[str], None]


class SideError(Exception):
    """A side cannot be used (unreadable, nothing to analyse); the message says which and why."""


def _quiet(_: str) -> None:
    return None


def _read_report(store: Store, key: str) -> Report:
    try:
        data = store.read(key, most=MAX_REPORT_BYTES)  # refused from its size, before it is downloaded
    except TooLargeError as exc:
        message = f"{store.uri(key)} is {exc.size} bytes, more than a report may be ({MAX_REPORT_BYTES})"
        raise SideError(message) from None
    try:
        return Report.model_validate_json(data)
    except (ValidationError, ValueError) as exc:
        raise SideError(f"{store.uri(key)} is not a stepscope report.json: {str(exc)[:MAX_ERROR_CHARS]}") from None


def _stored_report(store: Store, location: StorageLocation) -> Report | None:
    for key in (location.key(REPORT_JSON), report_location(location).key(REPORT_JSON)):
        if store.exists(key):
            return _read_report(store, key)
    return None


def load_side(
    source: str,
    settings: EndpointSettings | None = None,
    *,
    top_n: int = DIFF_TOP_N,
    progress: Progress = _quiet,
) -> Report:
    """The Report of one side; raises SideError when the source cannot give one. `settings`: endpoint, region and
    addressing style (a Connection or a session's StorageSpec); keys from the environment (Credentials.from_env)."""
    from stepscope_analyzer.ranks.pipeline import discover, summarize_all  # the analysis, only for trace sources
    from stepscope_analyzer.reduce.reduction import reduce_outcomes

    try:
        location = location_of(source)
        store = open_store(location, settings, Credentials.from_env())
        if PurePosixPath(location.prefix).name.endswith(REPORT_JSON):
            progress(f"reading the report {location.uri}")
            return _read_report(store, location.prefix)
        layout = discover(store, location)
        outcomes = []
        if layout.inputs:
            kind = "session folder" if layout.session else "folder of traces"
            progress(f"analysing {len(layout.inputs)} rank(s) of {location.uri} ({kind})")
            outcomes = summarize_all(store, layout, top_n=top_n, progress=progress)
        if not any(o.skipped is None for o in outcomes):  # nothing, or only files that are not traces
            stored = _stored_report(store, location)
            if stored is None:
                raise SideError(f"no traces and no report.json in {location.uri}")
            progress(f"no traces in {location.uri}: using its report.json")
            return stored
        return reduce_outcomes(outcomes, include_missing=layout.session, notes=layout.notes)
    except (StorageUriError, StorageError) as exc:
        raise SideError(str(exc)[:MAX_ERROR_CHARS]) from None
