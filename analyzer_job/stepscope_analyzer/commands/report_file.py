"""report.json written rank by rank, never whole in memory, and never beyond max_report_json_bytes.

report.json holds at most REPORT_RANKS_IN_FULL analysed ranks in full (reduce/report_ranks.py), each of them up to
a few megabytes, and serialising the Report in one go would hold its bytes (and the serializer's growing buffer)
beside the models. Here the Report is serialised without its ranks, then
each rank on its own, indented to its place in the list, into a file: the same bytes as
report.model_json_bytes(report), with one rank's JSON in memory at a time. A report whose JSON the fast path cannot
write (a name with a lone surrogate), or whose ranks' place is not where it is looked for, is written whole by
model_json_bytes (which makes such names '?').
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic_core import PydanticSerializationError

from stepscope_analyzer import limits
from stepscope_analyzer.ranks.storage_io import Store
from stepscope_analyzer.report import model_json_bytes
from stepscope_contract.report import Report

_RANKS = b'\n "ranks": []'
"""the ranks' place in the report serialised without them (indent 1: a newline in the JSON is always layout, a
string's newline being escaped, so this is the top level's key and nothing else)"""
_ITEM_INDENT = b"  "


def _chunks(report: Report) -> Iterator[bytes]:
    """report.json's bytes (indent 1) in pieces: the report before its ranks, each rank, the rest."""
    serializer = Report.__pydantic_serializer__
    shell = serializer.to_json(report.model_copy(update={"ranks": []}), indent=1)
    if not report.ranks:
        yield shell
        return
    at = shell.find(_RANKS)
    if at < 0:  # not where it is looked for (the serialiser's layout changed): the report whole
        yield model_json_bytes(report)
        return
    yield shell[:at] + b'\n "ranks": ['
    for i, rank in enumerate(report.ranks):
        body = type(rank).__pydantic_serializer__.to_json(rank, indent=1)
        yield (b",\n" if i else b"\n") + _ITEM_INDENT + body.replace(b"\n", b"\n" + _ITEM_INDENT)
    yield b"\n ]" + shell[at + len(_RANKS) :]


def write_report_json(report: Report, out: BinaryIO) -> None:
    """report.json into `out` (from where it stands), as model_json_bytes(report) makes it; LimitExceededError
    beyond max_report_json_bytes (the analyzer pod's scratch space holds report.json on its way to storage)."""
    table = limits.current()
    start = out.tell()
    try:
        for piece in _chunks(report):
            out.write(piece)
            if out.tell() - start > table.max_report_json_bytes:
                raise table.exceeded("max_report_json_bytes", "report.json")
    except PydanticSerializationError:
        out.seek(start)
        out.truncate()
        whole = model_json_bytes(report)
        if len(whole) > table.max_report_json_bytes:
            raise table.exceeded("max_report_json_bytes", "report.json") from None
        out.write(whole)


def save_report_json(report: Report, path: Path) -> None:
    """report.json at `path` (a local file)."""
    with path.open("wb") as out:
        write_report_json(report, out)


def store_report_json(report: Report, store: Store, key: str) -> str:
    """report.json stored at `key` through a temporary file (uploaded in parts above the store's threshold); its
    URI."""
    with tempfile.TemporaryDirectory(prefix="stepscope-report-") as folder:
        path = Path(folder) / "report.json"
        save_report_json(report, path)
        return store.put_file(path, key, "application/json").uri
