"""The reduce step: every rank's outcome (pipeline; past the diagnosis's budget, the ranks table of every rank and
the outcomes of the ranks it compares: ranks/two_pass.py) -> the job's Report: missing ranks, ranks from another
job, collective waits, the diagnosis (with the Flight Recorder dumps), the distributions, and the report model with
the ranks it holds in full (report_ranks)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope_analyzer import limits
from stepscope_analyzer.diagnosis import DiagnosisConfig, diagnose, with_collective_waits
from stepscope_analyzer.error_text import MAX_ERROR_CHARS
from stepscope_analyzer.flight_recorder import Dump, load_dumps
from stepscope_analyzer.ranks.discovery import Layout
from stepscope_analyzer.ranks.facts import FactsTable
from stepscope_analyzer.ranks.pipeline import RankOutcome
from stepscope_analyzer.ranks.storage_io import Store
from stepscope_analyzer.reduce import missing
from stepscope_analyzer.reduce.distributions import distributions
from stepscope_analyzer.reduce.job_groups import split_jobs
from stepscope_analyzer.reduce.report_ranks import report_ranks
from stepscope_analyzer.report import build_report
from stepscope_contract.python_stacks import MAX_PEERS, PythonProfile
from stepscope_contract.report import Diagnosis, RankError, RankReport, RankStatus, Report, SessionInfo

if TYPE_CHECKING:
    from stepscope_analyzer.analyses.folded_stacks import FoldedStacks

StacksLoader = Callable[[list[int]], "tuple[dict[int, FoldedStacks], list[RankError]]"]
"""reads the sampled Python stacks of the ranks asked for (ranks.python_stacks_io.load_python_stacks)"""

__all__ = ["facts_of", "flight_recorder_dumps", "missing_rank_ranges", "missing_ranks", "reduce_outcomes"]

MAX_NUMBERED_SHOWN = 8


def facts_of(outcomes: list[RankOutcome]) -> FactsTable:
    """The ranks table of outcomes held whole (every rank that is not skipped)."""
    table = FactsTable()
    for o in outcomes:
        if o.skipped is None:
            table.add(o.summary)
    return table


def missing_rank_ranges(table: FactsTable) -> list[tuple[int, int]]:
    """Ranks below the world size that the manifests announce but storage does not hold, as inclusive ranges."""
    most = limits.current().max_world_size
    sizes = [s for s in table.ints["world_size"] if 0 < s <= most]
    return missing.missing_ranges(table.ints["rank"], max(sizes)) if sizes else []


def missing_ranks(table: FactsTable) -> list[RankReport]:
    """The first `max_listed_missing_ranks` missing ranks, one RankReport each (all of them: missing_rank_ranges)."""
    listed = missing.first(missing_rank_ranges(table), limits.current().max_listed_missing_ranks)
    message = "expected from the world size, but nothing was uploaded"
    return [RankReport(rank=r, status=RankStatus.MISSING, error=message) for r in listed]


def flight_recorder_dumps(store: Store, layout: Layout) -> tuple[dict[int, Dump], list[RankError]]:
    """Every rank's Flight Recorder dump (bounded, parsed), and an error per rejected file."""
    keys = [(i.rank, i.flight_recorder_key) for i in layout.inputs if i.rank is not None and i.flight_recorder_key]
    return load_dumps(store, [(rank, key) for rank, key in keys if rank is not None and key])


def _exclude_foreign(summaries: list[RankReport], errors: list[RankError]) -> tuple[list[RankReport], str | None]:
    """Ranks from another job than the largest group become errors named with the reason; the note says so."""
    groups = split_jobs([s for s in summaries if s.status is RankStatus.OK])
    if not groups.foreign:
        return summaries, None
    out = []
    for s in summaries:
        why = groups.foreign.get(s.rank)
        if why is None or s.status is not RankStatus.OK:
            out.append(s)
            continue
        message = f"from a different job ({why}): not compared with the others"
        out.append(RankReport(rank=s.rank, status=RankStatus.ERROR, error=message, node=s.node, pod=s.pod,
                              trace_uri=s.trace_uri, world_size=s.world_size, device=s.device))  # fmt: skip
        errors.append(RankError(rank=s.rank, source=s.trace_uri or "", message=message))
    return out, groups.note


def python_evidence(
    diagnosis: Diagnosis, summaries: list[RankReport], load: StacksLoader
) -> tuple[Diagnosis, PythonProfile | None, list[RankError]]:
    """The host-named slow ranks' Python lines against their peers (only those ranks' stacks are read)."""
    if not diagnosis.slow_ranks:  # nothing to name: the analyses the Python lines load are not imported
        return diagnosis, None, []
    # the Python lines load the analyses (folded stacks): imported when the evidence is made, not with this module
    from stepscope_analyzer.diagnosis.python_lines import host_named, peers_of, with_python_lines

    named = [s.rank for s in diagnosis.slow_ranks if host_named(s)]
    if not named:
        return diagnosis, None, []
    ok = [s.rank for s in summaries if s.status is RankStatus.OK]
    slow = {s.rank for s in diagnosis.slow_ranks}
    peers = {r: peers_of(r, ok, slow, MAX_PEERS) for r in named}
    stacks, errors = load(sorted(set(named).union(*peers.values())))
    diagnosis, profile = with_python_lines(diagnosis, stacks, peers)
    return diagnosis, profile, errors


def reduce_outcomes(
    outcomes: list[RankOutcome],
    *,
    config: DiagnosisConfig | None = None,
    session: SessionInfo | None = None,
    started: float | None = None,
    include_missing: bool = False,
    notes: list[str] | None = None,
    flight_recorder: tuple[dict[int, Dump], list[RankError]] | None = None,
    python_stacks: StacksLoader | None = None,
    table: FactsTable | None = None,
    released_errors: list[RankError] | None = None,
) -> Report:
    """The job's report. `outcomes`: every rank held whole, or (with `table`, the ranks table of every rank) the
    ranks not analysed and the analysed ranks the diagnosis compares; `released_errors`: the errors of the others."""
    kept = [o for o in outcomes if o.skipped is None]
    sampled = table is not None and len(table) > len(kept)
    table = table if table is not None else facts_of(kept)
    all_notes = list(notes or []) + [o.skipped for o in outcomes if o.skipped is not None]
    summaries = [o.summary for o in kept]
    errors = [e for o in kept for e in o.errors] + list(released_errors or [])
    gaps = missing_rank_ranges(table) if include_missing else []
    dumps, dump_errors = flight_recorder or ({}, [])
    errors += dump_errors
    if include_missing:
        absent = missing_ranks(table)
        summaries += absent
        errors += [RankError(rank=a.rank, source="", message=a.error or "missing") for a in absent]
        if missing.count(gaps) > len(absent):
            text = f"{missing.count(gaps)} ranks of the world size have no upload: {missing.rank_set_text(gaps)}"
            errors.append(RankError(rank=None, source="", message=text[:MAX_ERROR_CHARS]))
    numbered = [o.numbered for o in kept if o.numbered]
    if numbered:
        shown = ", ".join(numbered[:MAX_NUMBERED_SHOWN]) + (
            f" and {len(numbered) - MAX_NUMBERED_SHOWN} more" if len(numbered) > MAX_NUMBERED_SHOWN else ""
        )
        all_notes.append(
            f"{len(numbered)} trace(s) say no rank (no distributedInfo, no rank<N> in the file name), numbered in "
            f"file-name order: {shown}; name the files rank<N> to fix their ranks"
        )
    held_ok = sum(1 for s in summaries if s.status is RankStatus.OK)
    summaries, other_jobs = _exclude_foreign(summaries, errors)
    foreign = held_ok - sum(1 for s in summaries if s.status is RankStatus.OK)
    if other_jobs:
        all_notes.append(other_jobs)
    summaries = [s for s in summaries if s.status is not RankStatus.OK] + with_collective_waits(
        [s for s in summaries if s.status is RankStatus.OK]
    )
    hangs = [o.hang for o in kept if o.hang is not None]
    sizes = [s.world_size for s in summaries if s.world_size and s.status is RankStatus.OK]
    if sampled:
        sizes += [s for i in table.ok_rows() if (s := table.ints["world_size"][i]) > 0]
    compared = sum(1 for s in summaries if s.status is RankStatus.OK)
    diagnosis: Diagnosis = diagnose(
        summaries,
        hang_evidence=hangs,
        config=config,
        world_size=max(sizes, default=None),
        other_jobs=other_jobs,
        flight_recorder=dumps,
        analysed=len(table.ok_rows()) - foreign if sampled else None,
    )
    profile = None
    if python_stacks is not None:
        diagnosis, profile, stack_errors = python_evidence(diagnosis, summaries, python_stacks)
        errors += stack_errors
    elapsed = time.perf_counter() - started if started is not None else 0.0
    in_full = report_ranks(summaries, diagnosis, sampled=sampled)
    report = build_report(
        summaries, diagnosis, errors=errors, session=session, analysis_seconds=elapsed, notes=all_notes, shown=in_full
    )
    report.distributions = distributions(table, compared)
    report.missing_ranks = missing.rank_set_text(gaps)
    report.python_profile = profile
    return report
