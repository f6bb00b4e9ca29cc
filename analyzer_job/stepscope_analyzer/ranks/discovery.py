"""Finding the ranks' artifacts in storage, and telling trace files from other files.

Two layouts are understood:
- a session folder (stepscope_contract.storage): traces/rank<R>.pt.trace.json.gz with traces/rank<R>/{manifest.json,
  stacks.txt, flight_recorder.json.gz, gpu_metrics.jsonl.gz, summary.json, python_stacks.folded}, or the first layout's
  ranks/<rank>/{trace.pt.trace.json.gz, ...};
- a plain folder of Kineto traces (files directly inside it) or one trace file. Only trace files are read:
  `*.pt.trace.json[.gz]`, and other `*.json[.gz]` files whose content is a Kineto document (checked on its first
  bytes when read); anything else (a README, a truth.json, a manifest) is skipped with a note. A folder with no
  trace directly inside is searched below: its subfolders' `*.pt.trace.json[.gz]` files (traces gathered per
  node), with a note.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from stepscope_analyzer import limits
from stepscope_analyzer.ranks.storage_io import Store
from stepscope_contract.storage import (
    FLIGHT_RECORDER_FILE,
    GPU_METRICS_FILE,
    MANIFEST_FILE,
    PYTHON_STACKS_FILE,
    RANK_SUMMARY_FILE,
    STACKS_FILE,
    TRACE_FILE,
    TRACE_SUFFIXES,
    StorageLocation,
    rank_artifact,
)

MAYBE_TRACE_SUFFIXES = (".json", ".json.gz")
PEEK_BYTES = 1 << 20
_KINETO_KEYS = (b'"traceEvents"', b'"schemaVersion"')


@dataclass
class RankInput:
    """One rank's artifacts in storage (any may be missing)."""

    rank: int | None
    name: str
    trace_key: str | None = None
    manifest_key: str | None = None
    stacks_key: str | None = None
    gpu_metrics_key: str | None = None
    flight_recorder_key: str | None = None
    node_summary_key: str | None = None
    """the rank's summary made where its trace was recorded (node_summaries)"""
    python_stacks_key: str | None = None
    """the Python stacks its hook sampled while the steps were recorded (read only for named ranks and peers)"""
    must_be_kineto: bool = False
    """a plain-folder file whose name alone does not say it is a trace: read it only if it is a Kineto document"""


@dataclass
class Layout:
    session: bool
    inputs: list[RankInput] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


_KEY_FIELDS = {
    TRACE_FILE: "trace_key",
    MANIFEST_FILE: "manifest_key",
    STACKS_FILE: "stacks_key",
    GPU_METRICS_FILE: "gpu_metrics_key",
    FLIGHT_RECORDER_FILE: "flight_recorder_key",
    RANK_SUMMARY_FILE: "node_summary_key",
    PYTHON_STACKS_FILE: "python_stacks_key",
}


def _session_inputs(location: StorageLocation, keys: list[str]) -> list[RankInput]:
    by_rank: dict[int, RankInput] = {}
    most = limits.current().max_world_size
    for key in keys:
        found = rank_artifact(location, key)  # either layout
        if found is None or found[0] >= most:  # a rank beyond any world size is no rank
            continue
        rank, artifact = found
        entry = by_rank.setdefault(rank, RankInput(rank=rank, name=f"rank {rank}"))
        field_name = _KEY_FIELDS.get(artifact)
        if field_name is not None:
            setattr(entry, field_name, key)
    return [by_rank[r] for r in sorted(by_rank)]


def discover(store: Store, location: StorageLocation) -> Layout:
    keys = store.list_keys(location)
    ranks = _session_inputs(location, keys)
    most = limits.current().max_ranks
    if ranks:
        return Layout(session=True, inputs=ranks[:most])
    root = location.prefix.rstrip("/")
    layout = Layout(session=False)
    for key in keys:
        name = PurePosixPath(key).name
        directly_inside = key == root or PurePosixPath(key).parent == PurePosixPath(root or ".")
        if not directly_inside:
            continue
        if name.endswith(TRACE_SUFFIXES):
            layout.inputs.append(RankInput(rank=None, name=name, trace_key=key))
        elif name.endswith(MAYBE_TRACE_SUFFIXES):
            layout.inputs.append(RankInput(rank=None, name=name, trace_key=key, must_be_kineto=True))
        else:
            layout.notes.append(f"{name}: skipped, not a trace file (*.pt.trace.json[.gz] or a Kineto *.json[.gz])")
    if not layout.inputs:
        layout = _nested(keys, root) or layout
    layout.inputs = layout.inputs[:most]
    return layout


def _nested(keys: list[str], root: str) -> Layout | None:
    """A folder with no trace directly inside: the `*.pt.trace.json[.gz]` files in its subfolders (traces gathered
    per node or per run), named by their path below the folder; None when there are none."""
    base = PurePosixPath(root or ".")
    found = [k for k in keys if PurePosixPath(k).name.endswith(TRACE_SUFFIXES) and k != root]
    if not found:
        return None
    layout = Layout(session=False)
    for key in found:
        path = PurePosixPath(key)
        name = str(path.relative_to(base)) if path.is_relative_to(base) else path.name
        layout.inputs.append(RankInput(rank=None, name=name, trace_key=key))
    layout.notes.append(f"no trace directly in the folder: {len(found)} trace file(s) found in its subfolders")
    return layout


def looks_like_kineto(data: bytes) -> bool:
    """Whether the (plain or gzip) bytes start like a Kineto document: a JSON object with traceEvents or, first
    of all, schemaVersion. Only the first PEEK_BYTES of the text are inflated."""
    head = data[:PEEK_BYTES]
    if data[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(wbits=31).decompress(data[: 4 * PEEK_BYTES], PEEK_BYTES)
        except zlib.error:
            return False
    text = head.lstrip()
    if not text.startswith(b"{"):
        return False
    if _KINETO_KEYS[0] in head:
        return True
    return text[1:].lstrip().startswith(_KINETO_KEYS[1])
