"""A rank summarised where its trace was recorded, and the central analysis' use of that summary.

The sidecar runs `python -m stepscope_analyzer.ranks.node_summaries --rank R --top-n N TRACE OUT` right after a capture,
at a lower priority than the training (nice) and on one CPU: the same `trace_work.compute` the central analysis runs
on the trace (parse + RankReport), written as a contract NodeSummary (with this analyzer's version and top-N) and
uploaded beside the trace as `traces/rank<R>/summary.json`. The sidecar never imports this package: it finds it in
its image and runs it as a command.

The sidecar hands the summary its rank's manifest before uploading it (the manifest goes up right after), so the
central analysis (pipeline) reads one file per rank: the summary, kilobytes instead of the trace's megabytes, and the
manifest inside it where manifest.json is in storage (an older summary without one: manifest.json is read). It parses
the trace only where the summary is missing, unreadable, stale (another analyzer version or top-N) or refused (the
node could not summarise the trace: parsing it here gives the rank its usual error). What it does with a summary is
what it does with its own `compute` result (node, pod, GPU metrics and manifest are added the same way), so the
report is the same.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import time
from pathlib import Path

from stepscope_analyzer import tool_version
from stepscope_analyzer.ranks.storage_io import StorageError, Store, read_bounded
from stepscope_analyzer.ranks.trace_work import compute
from stepscope_analyzer.workers.rank_pool import Computed
from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.manifest import RankManifest

ENV_NODE_SUMMARIES = "STEPSCOPE_NODE_SUMMARIES"
"""`off`: the central analysis parses every trace, whatever summaries lie beside them (comparisons, debugging)"""


@functools.cache
def analyzer_version() -> str:
    """This analyzer's version, read once (the package metadata is parsed on every read)."""
    return tool_version()


def node_summaries_enabled() -> bool:
    return os.environ.get(ENV_NODE_SUMMARIES, "").strip().lower() not in ("off", "0", "false", "no")


def summarise_trace(trace: bytes, rank: int | None, top_n: int) -> NodeSummary:
    """The node's summary of one trace, on one CPU: the central analysis' own `compute`."""
    started = time.process_time()
    computed = compute(trace, rank, None, top_n, cpus=1)
    return NodeSummary(
        analyzer_version=analyzer_version(),
        top_n=top_n,
        rank=computed.rank,
        summary=computed.summary,
        error=(computed.error or "")[:4000] or None,
        seconds=round(time.process_time() - started, 3),
    )


def read_node_summary(
    store: Store, key: str, rank: int, top_n: int
) -> tuple[Computed | None, RankManifest | None, str]:
    """Rank `rank`'s summary made on its node, as the central `compute` would have returned it, with the manifest it
    carries (None: read manifest.json); (None, None, why) when the trace must be parsed here instead."""
    try:
        node = NodeSummary.model_validate_json(read_bounded(store, key, "max_summary_bytes"))
    except (StorageError, ValueError) as exc:
        return None, None, f"node summary unreadable: {str(exc)[:300]}"
    why = node.usable_for(analyzer_version(), top_n)
    if why is None and (node.rank != rank or node.summary is None or node.summary.rank != rank):
        why = f"it is rank {node.rank}'s"
    if why is not None:
        return None, None, f"node summary not used: {why}"
    manifest = node.manifest if node.manifest is not None and node.manifest.rank == rank else None
    return Computed(node.summary, None, rank), manifest, ""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m stepscope_analyzer.ranks.node_summaries",
        description="summarise one rank's Kineto trace where it was recorded (the sidecar runs this)",
    )
    p.add_argument("trace", type=Path, help="the rank's trace (.pt.trace.json[.gz])")
    p.add_argument("output", type=Path, help="where the NodeSummary JSON goes")
    p.add_argument("--rank", type=int, default=None, help="the rank (unset: as the trace says)")
    p.add_argument("--top-n", type=int, default=50, help="top kernels/functions kept (the analyzer Job's --top-n)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        trace = args.trace.read_bytes()
    except OSError as exc:
        print(f"node summary: cannot read {args.trace}: {exc}", file=sys.stderr)
        return 2
    node = summarise_trace(trace, args.rank, args.top_n)
    del trace
    tmp = args.output.with_name(args.output.name + ".part")
    tmp.write_text(node.model_dump_json(by_alias=True, exclude_none=True), encoding="utf-8")
    tmp.replace(args.output)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    state = "summarised" if node.summary is not None else f"refused ({node.error})"
    print(f"node summary: rank {node.rank}: {state} in {node.seconds} s CPU, peak {peak_mib:.0f} MiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
