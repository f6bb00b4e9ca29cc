"""The evidence files beside a report, made after the diagnosis: the merged trace (report/merged/) of the ranks that
matter, and the speedscope file of the named rank's Python stacks. Which ranks: every rank of a job of at most
WHOLE_JOB_RANKS ranks; else the named ones (slow ranks, hung culprits) and their nearest healthy peers, MAX_RANKS in
all. Each trace is read whole within the contract's MAX_SOURCE_BYTES (stored and inflated), one at a time; a rank
whose trace is larger or cannot be read is left out with a note. The returned paths are relative to the report's
folder."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from stepscope_analyzer.evidence.merged_trace import RankTrace, merge
from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.stream import InflateError, inflate_bounded
from stepscope_analyzer.ranks.discovery import Layout
from stepscope_analyzer.ranks.storage_io import StorageError, Store
from stepscope_contract.merged_trace import MAX_RANKS, MAX_SOURCE_BYTES, WHOLE_JOB_RANKS
from stepscope_contract.report import RankStatus, Report
from stepscope_contract.storage import MERGED_TRACE_DIR, MERGED_TRACE_FILE, SPEEDSCOPE_FILE

MERGED_LINK = f"{MERGED_TRACE_DIR}/{MERGED_TRACE_FILE}"


@dataclass
class EvidenceFiles:
    report: Report
    files: dict[str, bytes] = field(default_factory=dict)
    """path below the report's folder -> content"""


def merged_ranks(report: Report) -> list[int]:
    """The ranks the merged trace holds, in rank order."""
    ok = sorted(r.rank for r in report.ranks if r.status is RankStatus.OK)
    if len(ok) <= WHOLE_JOB_RANKS:
        return ok
    named = [s.rank for s in report.diagnosis.slow_ranks] + [h.rank for h in report.diagnosis.hangs if h.culprit]
    chosen = list(dict.fromkeys(r for r in named if r in ok))[: MAX_RANKS // 2]
    others = sorted((r for r in ok if r not in chosen), key=lambda r: (min((abs(r - n) for n in chosen), default=0), r))
    return sorted(chosen + others[: MAX_RANKS - len(chosen)])


def _read(store: Store, key: str) -> list[dict[str, object]]:
    text, whole = inflate_bounded(store.read(key, most=MAX_SOURCE_BYTES), MAX_SOURCE_BYTES)
    if not whole:
        raise TraceError("its gzip stream is cut short")
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN, Infinity or integers past 64 bits, which the standard decoder takes
        document = json.loads(text)
    events = document.get("traceEvents") if isinstance(document, dict) else None
    if not isinstance(events, list):
        raise TraceError("no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def _encoded(document: Any) -> bytes:
    try:
        return orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # integers past 64 bits
        return json.dumps(document, separators=(",", ":")).encode()


def _label(report: Report, rank: int) -> str:
    pod = next((r.pod for r in report.ranks if r.rank == rank and r.pod), None)
    return f"rank {rank} ({pod[:100]})" if pod else f"rank {rank}"


def merged_trace(store: Store, layout: Layout, report: Report) -> tuple[bytes | None, Report]:
    """The merged trace (gzip) and the report that describes it (merged_trace, notes); None when no rank's trace
    could be read."""
    keys = {i.rank: i.trace_key for i in layout.inputs if i.rank is not None and i.trace_key}
    traces, notes = [], []
    for rank in merged_ranks(report):
        key = keys.get(rank)
        if key is None:
            continue
        try:
            traces.append(RankTrace(rank, _label(report, rank), _read(store, key)))
        except (StorageError, TraceError, InflateError, ValueError) as exc:
            notes.append(f"merged trace: rank {rank} left out ({str(exc)[:200]})")
    if not traces:
        return None, report
    index = report.timeline.step_index if report.timeline is not None else None
    document, info = merge(traces, index)
    data = gzip.compress(_encoded(document), compresslevel=5)
    info = info.model_copy(update={"link": MERGED_LINK})
    return data, report.model_copy(update={"merged_trace": info, "notes": report.notes + notes})


def evidence_files(store: Store, layout: Layout, report: Report) -> EvidenceFiles:
    """The report with its evidence files described, and those files."""
    out = EvidenceFiles(report)
    data, out.report = merged_trace(store, layout, report)
    if data is not None:
        out.files[MERGED_LINK] = data
    if report.python_profile is not None:
        from stepscope_analyzer.evidence.speedscope import speedscope_bytes  # it loads the analyses: only here

        out.files[SPEEDSCOPE_FILE] = speedscope_bytes(report.python_profile)
    return out
