"""From storage to a Report: find the ranks, summarise each (a bad rank never stops the others), diagnose.

Two layouts are understood:
- a session folder (stepscope_contract.storage): traces/rank<R>.pt.trace.json.gz with traces/rank<R>/{manifest.json,
  stacks.txt, flight_recorder.json.gz, gpu_metrics.jsonl.gz}, or the first layout's
  ranks/<rank>/{trace.pt.trace.json.gz, ...};
- a plain folder of Kineto traces (*.json, *.json.gz directly inside it) or one trace file; the rank comes from
  the trace's distributedInfo, else from a 'rank<N>' in the file name; a rank claimed twice is moved to the
  next free number with a note in the errors.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pydantic import ValidationError

from stepscope_analyzer import limits, missing
from stepscope_analyzer.analyses import summarize_parsed
from stepscope_analyzer.diagnosis import DiagnosisConfig, HangEvidence, diagnose
from stepscope_analyzer.flight_recorder import Dump, load_dumps
from stepscope_analyzer.parse import parse_trace
from stepscope_analyzer.rank_artifacts import rank_extras
from stepscope_analyzer.report import build_report
from stepscope_analyzer.storage_io import StorageError, Store, read_bounded
from stepscope_contract.manifest import RankManifest
from stepscope_contract.report import Diagnosis, RankError, RankReport, RankStatus, Report, SessionInfo
from stepscope_contract.storage import (
    FLIGHT_RECORDER_FILE,
    GPU_METRICS_FILE,
    MANIFEST_FILE,
    STACKS_FILE,
    TRACE_FILE,
    StorageLocation,
    rank_artifact,
)
from stepscope_contract.wire import CaptureState

Progress = Callable[[str], None]
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_TRACE_SUFFIXES = (".json", ".json.gz")
_NOT_TRACES = frozenset({"manifest.json", "report.json", "meta.json", "summary.json"})
MAX_ERROR_CHARS = 2000


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


@dataclass
class Layout:
    session: bool
    inputs: list[RankInput] = field(default_factory=list)


def _quiet(_: str) -> None:
    return None


def discover(store: Store, location: StorageLocation) -> Layout:
    keys = store.list_keys(location)
    by_rank: dict[int, RankInput] = {}
    most = limits.current().max_world_size
    for key in keys:
        found = rank_artifact(location, key)  # either layout
        if found is None or found[0] >= most:  # a rank beyond any world size is no rank
            continue
        rank, artifact = found
        entry = by_rank.setdefault(rank, RankInput(rank=rank, name=f"rank {rank}"))
        if artifact == TRACE_FILE:
            entry.trace_key = key
        elif artifact == MANIFEST_FILE:
            entry.manifest_key = key
        elif artifact == STACKS_FILE:
            entry.stacks_key = key
        elif artifact == GPU_METRICS_FILE:
            entry.gpu_metrics_key = key
        elif artifact == FLIGHT_RECORDER_FILE:
            entry.flight_recorder_key = key
    if by_rank:
        return Layout(session=True, inputs=[by_rank[r] for r in sorted(by_rank)][: limits.current().max_ranks])
    root = location.prefix.rstrip("/")
    plain = []
    for key in keys:
        name = PurePosixPath(key).name
        directly_inside = key == root or PurePosixPath(key).parent == PurePosixPath(root or ".")
        if directly_inside and name.endswith(_TRACE_SUFFIXES) and name not in _NOT_TRACES:
            plain.append(RankInput(rank=None, name=name, trace_key=key))
    return Layout(session=False, inputs=plain[: limits.current().max_ranks])


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError | StorageError) else str(exc)
    return text[:MAX_ERROR_CHARS]


@dataclass
class RankOutcome:
    summary: RankReport
    errors: list[RankError] = field(default_factory=list)
    hang: HangEvidence | None = None
    needs_rank: bool = False
    """a plain-folder trace that failed before its rank was known: numbered after the others"""


def _read_manifest(store: Store, inp: RankInput) -> tuple[RankManifest | None, str | None]:
    if inp.manifest_key is None:
        return None, None
    try:
        manifest = RankManifest.model_validate_json(read_bounded(store, inp.manifest_key, "max_manifest_bytes"))
        if manifest.meta is not None and manifest.meta.world_size > limits.current().max_world_size:
            raise limits.current().exceeded(
                "max_world_size", f"the manifest claims world size {manifest.meta.world_size}"
            )
        return manifest, None
    except (StorageError, ValidationError, ValueError) as exc:
        return None, f"manifest.json unreadable: {_error_text(exc)}"


def summarize_input(store: Store, inp: RankInput, *, top_n: int = 50, claimed: set[int] | None = None) -> RankOutcome:
    """Summarise one rank; every failure becomes a rank with status error, never an exception."""
    errors: list[RankError] = []
    manifest, manifest_error = _read_manifest(store, inp)
    if manifest_error:
        errors.append(RankError(rank=inp.rank, source=inp.manifest_key or "", message=manifest_error))
    meta = manifest.meta if manifest else None
    node = (manifest.node if manifest else None) or (meta.node if meta else None)
    pod = (manifest.pod if manifest else None) or (meta.pod if meta else None)
    stacks = ""
    if inp.stacks_key:
        try:
            stacks = read_bounded(store, inp.stacks_key, "max_stacks_bytes", truncate=True).decode("utf-8", "replace")
        except StorageError as exc:
            errors.append(RankError(rank=inp.rank, source=inp.stacks_key, message=_error_text(exc)))
    hung = bool((meta and meta.hung) or (manifest and manifest.state is CaptureState.HUNG))
    hang = None
    if hung and inp.rank is not None:
        hang = HangEvidence(
            rank=inp.rank,
            hung=True,
            node=node,
            last_step=meta.steps_captured if meta else None,
            seconds_since_last_step=meta.seconds_since_last_step if meta else None,
            stacks=stacks,
        )
    trace_uri = store.uri(inp.trace_key) if inp.trace_key else None
    base = {"node": node, "pod": pod, "trace_uri": trace_uri, "world_size": meta.world_size if meta else None}

    def failed(status: RankStatus, message: str, source: str) -> RankOutcome:
        rank = inp.rank if inp.rank is not None else 0
        errors.append(RankError(rank=inp.rank, source=source, message=message))
        return RankOutcome(RankReport(rank=rank, status=status, error=message, **base), errors, hang)

    if hung:
        rank = inp.rank if inp.rank is not None else 0
        return RankOutcome(
            RankReport(rank=rank, status=RankStatus.HUNG, error="hung: no step boundary", **base), errors, hang
        )
    if inp.trace_key is None:
        why = "; ".join(manifest.errors) if manifest and manifest.errors else ""
        state = manifest.state.value if manifest else "nothing uploaded"
        status = RankStatus.MISSING if manifest is None or not manifest.errors else RankStatus.ERROR
        return failed(status, f"no trace ({state}){': ' + why if why else ''}", inp.manifest_key or inp.name)
    try:
        trace = parse_trace(read_bounded(store, inp.trace_key, "max_trace_file_bytes"))
        trace_rank = inp.rank if inp.rank is not None else trace.rank
        if trace_rank is None:
            match = _RANK_IN_NAME.search(inp.name)
            trace_rank = int(match.group(1)) if match else 0
        rank = trace_rank
        if inp.rank is None and claimed is not None and rank in claimed:
            free = max(claimed) + 1
            errors.append(
                RankError(
                    rank=free,
                    source=inp.trace_key,
                    message=f"{inp.name} says rank {rank}, which another file already holds; listed as rank {free}",
                )
            )
            rank = free
        summary = summarize_parsed(trace, rank=rank, top_n=top_n)
    except Exception as exc:  # a bad rank never stops the others
        outcome = failed(RankStatus.ERROR, _error_text(exc), inp.trace_key or inp.name)
        outcome.needs_rank = inp.rank is None
        return outcome
    if claimed is not None:
        claimed.add(summary.rank)
    update = {k: v for k, v in base.items() if v is not None}
    extras, extra_errors = rank_extras(store, inp.gpu_metrics_key, manifest, summary)
    return RankOutcome(summary.model_copy(update=update | extras), errors + extra_errors, hang)


def summarize_all(
    store: Store, layout: Layout, *, top_n: int = 50, progress: Progress = _quiet, ranks: set[int] | None = None
) -> list[RankOutcome]:
    claimed: set[int] = set()
    outcomes: list[RankOutcome] = []
    chosen = [i for i in layout.inputs if ranks is None or i.rank in ranks]
    for n, inp in enumerate(chosen, 1):
        started = time.perf_counter()
        outcome = summarize_input(store, inp, top_n=top_n, claimed=None if layout.session else claimed)
        s = outcome.summary
        state = s.status.value if s.status is not RankStatus.OK else f"{s.steps.count} steps"
        progress(f"[{n}/{len(chosen)}] rank {s.rank} ({inp.name}): {state} in {time.perf_counter() - started:.2f} s")
        outcomes.append(outcome)
    for outcome in outcomes:
        if outcome.needs_rank:
            free = max(claimed, default=-1) + 1
            claimed.add(free)
            outcome.summary = outcome.summary.model_copy(update={"rank": free})
            outcome.errors = [e.model_copy(update={"rank": free}) for e in outcome.errors]
    return outcomes


def missing_rank_ranges(outcomes: list[RankOutcome]) -> list[tuple[int, int]]:
    """Ranks below the world size that the manifests announce but storage does not hold, as inclusive ranges."""
    most = limits.current().max_world_size
    sizes = [o.summary.world_size for o in outcomes if o.summary.world_size and o.summary.world_size <= most]
    return missing.missing_ranges((o.summary.rank for o in outcomes), max(sizes)) if sizes else []


def missing_ranks(outcomes: list[RankOutcome]) -> list[RankReport]:
    """The first `max_listed_missing_ranks` missing ranks, one RankReport each (all of them: missing_rank_ranges)."""
    listed = missing.first(missing_rank_ranges(outcomes), limits.current().max_listed_missing_ranks)
    message = "expected from the world size, but nothing was uploaded"
    return [RankReport(rank=r, status=RankStatus.MISSING, error=message) for r in listed]


def flight_recorder_dumps(store: Store, layout: Layout) -> tuple[dict[int, Dump], list[RankError]]:
    """Every rank's Flight Recorder dump (bounded, parsed), and an error per rejected file."""
    keys = [(i.rank, i.flight_recorder_key) for i in layout.inputs if i.rank is not None and i.flight_recorder_key]
    return load_dumps(store, [(rank, key) for rank, key in keys if rank is not None and key])


def reduce_outcomes(
    outcomes: list[RankOutcome],
    *,
    config: DiagnosisConfig | None = None,
    session: SessionInfo | None = None,
    started: float | None = None,
    include_missing: bool = False,
    flight_recorder: tuple[dict[int, Dump], list[RankError]] | None = None,
) -> Report:
    summaries = [o.summary for o in outcomes]
    errors = [e for o in outcomes for e in o.errors]
    gaps = missing_rank_ranges(outcomes) if include_missing else []
    dumps, dump_errors = flight_recorder or ({}, [])
    errors += dump_errors
    if include_missing:
        absent = missing_ranks(outcomes)
        summaries += absent
        errors += [RankError(rank=a.rank, source="", message=a.error or "missing") for a in absent]
        if missing.count(gaps) > len(absent):
            text = f"{missing.count(gaps)} ranks of the world size have no upload: {missing.rank_set_text(gaps)}"
            errors.append(RankError(rank=None, source="", message=text[:MAX_ERROR_CHARS]))
    sizes = sorted({s.world_size for s in summaries if s.world_size and s.status is RankStatus.OK})
    if len(sizes) > 1:
        message = f"the traces come from jobs of different world sizes ({', '.join(map(str, sizes))}); ranks of "
        errors.append(RankError(rank=None, source="", message=message + "different jobs are not comparable"))
    hangs = [o.hang for o in outcomes if o.hang is not None]
    diagnosis: Diagnosis = diagnose(summaries, hang_evidence=hangs, config=config, flight_recorder=dumps)
    elapsed = time.perf_counter() - started if started is not None else 0.0
    report = build_report(summaries, diagnosis, errors=errors, session=session, analysis_seconds=elapsed)
    report.missing_ranks = missing.rank_set_text(gaps)
    return report
