"""A rank summarised where its trace was recorded, and the central analysis' use of that summary.

The sidecar runs `python -m stepscope_analyzer.ranks.node_summaries --rank R --top-n N --capture-id ID TRACE OUT`
right after a capture, at a lower priority than the training (nice) and on one CPU: the same `trace_work.compute` the
central analysis runs on the trace (parse + RankReport), written as a contract NodeSummary (with this analyzer's
version and top-N, the trace's SHA-256 and size, and the capture id) and uploaded beside the trace as
`traces/rank<R>/summary.json`. A summary beyond its declared shape (stepscope_contract.node_summary_shape) is written
as a refusal instead. The sidecar never imports this package: it finds it in its image and runs it as a command.

The sidecar hands the summary its rank's manifest before uploading it (the manifest goes up right after), so the
central analysis (pipeline) reads one file per rank: the summary, kilobytes instead of the trace's megabytes, and the
manifest inside it where manifest.json is in storage (an older summary without one: manifest.json is read). It parses
the trace only where the summary is missing, unreadable, stale (another analyzer version or top-N) or refused (the
node could not summarise the trace: parsing it here gives the rank its usual error). What it does with a summary is
what it does with its own `compute` result (node, pod, GPU metrics and manifest are added the same way), so the
report is the same.

A summary is untrusted input (the pod's folder): read within max_node_summary_bytes (refused from its stored size),
its values counted on the bytes before decoding (max_node_summary_values), decoded by the model's own validator with
the declared shape built in (summary_shape_decoder: no NaN or Infinity, every cap, checked as the model is built; one
it refuses is decoded again and walked, shape_error, for the reason), and bound to the rank's trace and the session's
capture (NodeSummary.binding_error, in the pipeline once the manifest is known). What every summary holds beyond
max_node_summary_free_bytes draws on one budget per analysis (max_node_summary_total_bytes). A summary refused for
any of these gives the rank an error naming the reason, and its trace is parsed here, bounded as traces are.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import re
import resource
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from stepscope_analyzer import limits, tool_version
from stepscope_analyzer.ranks.storage_io import StorageError, Store, read_bounded
from stepscope_analyzer.ranks.summary_shape_decoder import bounded_validator, value_bound
from stepscope_analyzer.ranks.trace_work import compute
from stepscope_analyzer.workers.rank_pool import Computed
from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.manifest import RankManifest
from stepscope_contract.node_summary_shape import (
    MAX_NODE_SUMMARY_BYTES,
    MAX_NODE_SUMMARY_VALUES,
    shape_error,
)

ENV_NODE_SUMMARIES = "STEPSCOPE_NODE_SUMMARIES"
"""`off`: the central analysis parses every trace, whatever summaries lie beside them (comparisons, debugging)"""


@functools.cache
def analyzer_version() -> str:
    """This analyzer's version, read once (the package metadata is parsed on every read)."""
    return tool_version()


def node_summaries_enabled() -> bool:
    return os.environ.get(ENV_NODE_SUMMARIES, "").strip().lower() not in ("off", "0", "false", "no")


def summarise_trace(trace: bytes, rank: int | None, top_n: int, capture_id: str | None = None) -> NodeSummary:
    """The node's summary of one trace, on one CPU: the central analysis' own `compute`, bound to the trace's bytes
    (SHA-256 and size) and to `capture_id`."""
    started = time.process_time()
    computed = compute(trace, rank, None, top_n, cpus=1)
    return NodeSummary(
        analyzer_version=analyzer_version(),
        top_n=top_n,
        trace_sha256=hashlib.sha256(trace).hexdigest(),
        trace_size=len(trace),
        capture_id=capture_id,
        rank=computed.rank,
        summary=computed.summary,
        error=(computed.error or "")[:4000] or None,
        seconds=round(time.process_time() - started, 3),
    )


def writable(node: NodeSummary) -> tuple[bytes, str | None]:
    """`node` as its JSON document, or a refusal (no summary, the reason as its error, still bound to the trace)
    where the document would break the declared shape the analysis checks, and why."""
    data = node.model_dump_json(by_alias=True, exclude_none=True).encode()
    why: str | None
    if len(data) > MAX_NODE_SUMMARY_BYTES:
        why = f"{len(data):,} bytes, more than {MAX_NODE_SUMMARY_BYTES:,} (MAX_NODE_SUMMARY_BYTES)"
    elif value_bound(data) > MAX_NODE_SUMMARY_VALUES:
        why = f"{value_bound(data):,} JSON values, more than {MAX_NODE_SUMMARY_VALUES:,} (MAX_NODE_SUMMARY_VALUES)"
    else:
        why = shape_error(json.loads(data), NodeSummary)
    if why is None:
        return data, None
    refusal = node.model_copy(update={"summary": None, "error": f"the summary is beyond its shape: {why}"[:4000]})
    return refusal.model_dump_json(by_alias=True, exclude_none=True).encode(), why


class SummaryBudget:
    """What the node summaries of one analysis may hold beyond max_node_summary_free_bytes each, together (shared by
    the reading threads)."""

    def __init__(self, table: limits.Limits) -> None:
        self.free = table.max_node_summary_free_bytes
        self.left = table.max_node_summary_total_bytes
        self._lock = threading.Lock()

    def charge(self, size: int) -> str | None:
        """None when a summary of `size` bytes fits (and is charged); else why not."""
        cost = max(0, size - self.free)
        with self._lock:
            if cost <= self.left:
                self.left -= cost
                return None
            left = self.left
        detail = f"{size:,} bytes, {cost:,} beyond the free {self.free:,}, {max(left, 0):,} left of the analysis's"
        return str(limits.current().exceeded("max_node_summary_total_bytes", detail))

    def refund(self, size: int) -> None:
        """Give back what a summary of `size` bytes was charged (it is not used after all)."""
        with self._lock:
            self.left += max(0, size - self.free)


_AT = re.compile(r"line (\d+) column (\d+)")
_LARGE = 1 * 1024 * 1024
_ONE_LARGE_AT_ONCE = threading.Lock()  # summaries over _LARGE bytes are decoded one at a time


def _decode_error(data: bytes, exc: ValueError) -> str:
    """The decoder's reason, in words where it stopped at a NaN or an Infinity."""
    found = _AT.search(str(exc))
    if found is not None and found.group(1) == "1":
        at = data[int(found.group(2)) - 1 :][:9].lstrip(b"-")
        for name in (b"NaN", b"Infinity"):
            if at.startswith(name):
                return f"{name.decode()} in the document: numbers must be finite"
    return f"not JSON: {str(exc)[:200]}"


def _decoded(data: bytes) -> Any:
    """The JSON document, no NaN or Infinity; ValueError when it is not JSON (or nests beyond the decoder)."""
    try:
        return from_json(data, allow_inf_nan=False, cache_strings="keys")
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    except ValueError as exc:
        raise ValueError(_decode_error(data, exc)) from exc


def _checked(data: bytes, budget: SummaryBudget) -> NodeSummary:
    """The summary in `data` within every limit and its declared shape; ValueError (why) otherwise."""
    table = limits.current()
    values = value_bound(data)
    if values > table.max_node_summary_values:
        raise table.exceeded("max_node_summary_values", f"the node summary holds up to {values:,} JSON values")
    over = budget.charge(len(data))
    if over is not None:
        raise ValueError(over)
    try:
        return _model(data)
    except ValueError:
        budget.refund(len(data))
        raise


def _model(data: bytes) -> NodeSummary:
    """The summary in `data`, built by one typed decode of its bytes that checks its declared shape as it goes; where
    that refuses, the document decoded again and walked, for the reason in the shape's or the model's words."""
    validator = bounded_validator()
    with _ONE_LARGE_AT_ONCE if len(data) > _LARGE else contextlib.nullcontext():
        if validator is not None:
            try:
                summary: NodeSummary = validator.validate_json(data)
                return summary
            except ValidationError:
                pass
        return _walked(_decoded(data))


def _walked(document: Any) -> NodeSummary:
    try:
        why = shape_error(document, NodeSummary)
    except RecursionError:
        why = "nested too deeply"
    if why is not None:
        raise ValueError(f"beyond its declared shape: {why}")
    try:
        return NodeSummary.model_validate(document)
    except ValidationError as exc:
        raise ValueError(f"not a node summary: {str(exc)[:300]}") from exc


@dataclass
class NodeRead:
    """A rank's node summary as read: usable (`computed`, with the manifest it carries, None: read manifest.json),
    or not (`why`; `refused`: for something wrong with it, which the rank's errors name, not only for being stale)."""

    computed: Computed | None = None
    manifest: RankManifest | None = None
    node: NodeSummary | None = None
    why: str = ""
    refused: bool = False
    size: int = 0
    """the document's bytes, charged to the analysis's budget while it is used"""


def read_node_summary(store: Store, key: str, rank: int, top_n: int, budget: SummaryBudget | None = None) -> NodeRead:
    """Rank `rank`'s summary made on its node, as the central `compute` would have returned it, with the manifest it
    carries; not usable (why) when the trace must be parsed here instead."""
    budget = budget or SummaryBudget(limits.current())
    try:
        data = read_bounded(store, key, "max_node_summary_bytes")
        node = _checked(data, budget)
    except (StorageError, ValueError) as exc:
        return NodeRead(why=f"node summary refused: {str(exc)[:600]}", refused=True)
    why = node.usable_for(analyzer_version(), top_n)
    if why is None and (node.rank != rank or node.summary is None or node.summary.rank != rank):
        budget.refund(len(data))
        return NodeRead(why=f"node summary refused: it is rank {node.rank}'s", refused=True)
    if why is not None:
        budget.refund(len(data))
        return NodeRead(why=f"node summary not used: {why}")
    manifest = node.manifest if node.manifest is not None and node.manifest.rank == rank else None
    return NodeRead(Computed(node.summary, None, rank), manifest, node, size=len(data))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m stepscope_analyzer.ranks.node_summaries",
        description="summarise one rank's Kineto trace where it was recorded (the sidecar runs this)",
    )
    p.add_argument("trace", type=Path, help="the rank's trace (.pt.trace.json[.gz])")
    p.add_argument("output", type=Path, help="where the NodeSummary JSON goes")
    p.add_argument("--rank", type=int, default=None, help="the rank (unset: as the trace says)")
    p.add_argument("--top-n", type=int, default=50, help="top kernels/functions kept (the analyzer Job's --top-n)")
    p.add_argument("--capture-id", default=None, help="the capture the trace was recorded in (binds the summary)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        trace = args.trace.read_bytes()
    except OSError as exc:
        print(f"node summary: cannot read {args.trace}: {exc}", file=sys.stderr)
        return 2
    node = summarise_trace(trace, args.rank, args.top_n, args.capture_id)
    del trace
    data, beyond = writable(node)
    tmp = args.output.with_name(args.output.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(args.output)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    state = "summarised" if node.summary is not None and beyond is None else f"refused ({beyond or node.error})"
    print(f"node summary: rank {node.rank}: {state} in {node.seconds} s CPU, peak {peak_mib:.0f} MiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
