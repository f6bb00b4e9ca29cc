"""From storage to every rank's outcome: read each rank, summarise it, assign ranks; reduction.py then diagnoses the
job.

read (rank_reading; a rank summarised on its node is taken from that summary, its trace not read: node_summaries)
-> summarise (one rank's artifacts -> RankOutcome; a bad rank never stops the others) ->
assign ranks (plain folders: the rank comes from the trace's distributedInfo, else from a 'rank<N>' in the file
name; of a rank's successive recording cycles the latest is kept; a rank claimed twice otherwise is moved to the
next free number with a note) -> reduce (reduction: job checks, diagnosis, report).
Layouts and the files that are read: discovery. This module imports neither the diagnosis nor the report (nor the
parser and analyses, which only the serial path and the workers load): `stepscope analyze` hands its first ranks to
the workers before it imports them (its `while_waiting`). The workers are forked before the first trace is read,
once this process has imported what they run (workers/forking), and a job of fewer than forking.POOL_MIN_RANKS
traces has no pool: each trace is parsed here on every CPU.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import TypeVar

from stepscope_analyzer import limits, phases
from stepscope_analyzer.ranks.compact import Compactor
from stepscope_analyzer.ranks.discovery import Layout, RankInput, discover
from stepscope_analyzer.ranks.hang_evidence import HangEvidence
from stepscope_analyzer.ranks.node_summaries import SummaryBudget, node_summaries_enabled, read_node_summary
from stepscope_analyzer.ranks.rank_artifacts import manifest_environment, rank_extras
from stepscope_analyzer.ranks.rank_reading import RankRead, read_rank
from stepscope_analyzer.ranks.recording_cycles import cycles_left_out, worker_of
from stepscope_analyzer.ranks.storage_io import LocalStore, Store, read_bounded
from stepscope_analyzer.ranks.trace_work import compute
from stepscope_analyzer.workers.forking import pool_size
from stepscope_analyzer.workers.rank_pool import Computed, Task, compute_all
from stepscope_contract.report import RankError, RankReport, RankStatus
from stepscope_contract.storage import TRACE_FILE
from stepscope_contract.wire import CaptureState

__all__ = [
    "Layout",
    "RankInput",
    "RankOutcome",
    "discover",
    "read_ahead",
    "summarise",
    "summarize_all",
]

Progress = Callable[[str], None]
T = TypeVar("T")
R = TypeVar("R")
NODE_READERS = 16  # node summaries read at once
READ_AHEAD = 2 * NODE_READERS  # node summaries read and not yet taken, at most
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def quiet(_: str) -> None:
    return None


@dataclass
class RankOutcome:
    summary: RankReport
    errors: list[RankError] = field(default_factory=list)
    hang: HangEvidence | None = None
    needs_rank: bool = False
    """a plain-folder trace whose rank is not known yet: assign_ranks numbers it"""
    skipped: str | None = None
    """not a rank at all (a file that is not a trace): why"""
    numbered: str | None = None
    """a trace that said no rank (no distributedInfo, no rank<N> in its name): '<file> as rank <N>'"""
    from_node: bool = False
    """summarised where the trace was recorded (its summary.json), the trace not parsed here"""


def _hang_of(read: RankRead) -> HangEvidence | None:
    manifest, inp = read.manifest, read.inp
    meta = manifest.meta if manifest else None
    hung = bool((meta and meta.hung) or (manifest and manifest.state is CaptureState.HUNG))
    if not hung or inp.rank is None:
        return None
    node = (manifest.node if manifest else None) or (meta.node if meta else None)
    return HangEvidence(
        rank=inp.rank,
        hung=True,
        node=node,
        last_step=meta.steps_captured if meta else None,
        seconds_since_last_step=meta.seconds_since_last_step if meta else None,
        stacks=read.stacks,
    )


def _base(read: RankRead, store: Store) -> dict[str, object]:
    manifest = read.manifest
    meta = manifest.meta if manifest else None
    return {
        "node": (manifest.node if manifest else None) or (meta.node if meta else None),
        "pod": (manifest.pod if manifest else None) or (meta.pod if meta else None),
        "trace_uri": store.uri(read.inp.trace_key) if read.inp.trace_key else None,
        "stacks_uri": store.uri(read.inp.stacks_key) if read.inp.stacks_key else None,
        "flight_recorder_uri": store.uri(read.inp.flight_recorder_key) if read.inp.flight_recorder_key else None,
        "world_size": meta.world_size if meta else None,
    }


def _failed(
    read: RankRead, base: dict[str, object], status: RankStatus, message: str, source: str, *, rank: int | None = None
) -> RankOutcome:
    inp = read.inp
    rank = inp.rank if inp.rank is not None else rank
    errors = [*read.errors, RankError(rank=rank, source=source, message=message)]
    summary = RankReport(rank=rank if rank is not None else 0, status=status, error=message, **base)
    return RankOutcome(summary, errors, _hang_of(read), needs_rank=rank is None)


def _rank_in_name(name: str) -> int | None:
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


def _without_trace(read: RankRead, base: dict[str, object]) -> RankOutcome:
    inp, manifest = read.inp, read.manifest
    if read.trace_error is not None:
        return _failed(read, base, RankStatus.ERROR, read.trace_error, inp.trace_key or inp.name)
    why = "; ".join(manifest.errors) if manifest and manifest.errors else ""
    state = manifest.state.value if manifest else "nothing uploaded"
    status = RankStatus.MISSING if manifest is None or not manifest.errors else RankStatus.ERROR
    return _failed(read, base, status, f"no trace ({state}){': ' + why if why else ''}", inp.manifest_key or inp.name)


def _without_analysis(read: RankRead, base: dict[str, object]) -> RankOutcome | None:
    """The outcome of a rank that has no trace to analyse (not a trace, hung, nothing or nothing readable), else
    None."""
    inp = read.inp
    if read.not_a_trace:
        return RankOutcome(RankReport(rank=0), skipped=f"{inp.name}: skipped, not a Kineto trace")
    hang = _hang_of(read)
    if hang is not None:
        summary = RankReport(
            rank=hang.rank,
            status=RankStatus.HUNG,
            error="hung: no step boundary",
            environment=manifest_environment(read.manifest),
            **base,
        )
        return RankOutcome(summary, list(read.errors), hang)
    if read.trace is None:
        return _without_trace(read, base)
    return None


def _finish(read: RankRead, store: Store, base: dict[str, object], computed: Computed) -> RankOutcome:
    inp, rank = read.inp, computed.rank
    if computed.summary is None:
        message = computed.error or "no summary"
        return _failed(read, base, RankStatus.ERROR, message, inp.trace_key or inp.name, rank=rank)
    update = {k: v for k, v in base.items() if v is not None}
    extras, extra_errors = rank_extras(store, inp.gpu_metrics_key, read.manifest, computed.summary)
    errors = list(read.errors) + extra_errors
    return RankOutcome(computed.summary.model_copy(update=update | extras), errors, needs_rank=rank is None)


def read_from_node(
    store: Store, inp: RankInput, top_n: int, capture_id: str | None = None, budget: SummaryBudget | None = None
) -> tuple[RankOutcome | None, str, bool]:
    """The rank's outcome from the summary its node made, its trace not read, nor its manifest where the summary
    carries it (None, why, refused: parse the trace instead; '' when it has no summary). A hung rank is left to the
    usual path: its stacks tell. The summary must be bound to the trace the manifest records and to the session's
    capture (`capture_id`; None: unknown)."""
    if inp.node_summary_key is None or inp.rank is None or inp.trace_key is None:
        return None, "", False
    budget = budget if budget is not None else SummaryBudget(limits.current())
    node = read_node_summary(store, inp.node_summary_key, inp.rank, top_n, budget)
    if node.computed is None or node.node is None:
        return None, node.why, node.refused
    read = read_rank(store, inp, with_trace=False, manifest=node.manifest)
    if _hang_of(read) is not None:
        budget.refund(node.size)
        return None, "", False
    unbound = node.node.binding_error(read.manifest, TRACE_FILE, capture_id)
    if unbound is not None:
        budget.refund(node.size)
        return None, f"node summary refused: {unbound}", True
    outcome = _finish(read, store, _base(read, store), node.computed)
    outcome.from_node = True
    return outcome, "", False


def read_ahead(pool: ThreadPoolExecutor, work: Callable[[T], R], items: list[T], ahead: int) -> Iterator[R]:
    """`work` of each item, in order, with at most `ahead` of them read and not yet taken (pool.map would read them
    all while the caller is still holding the first ones: the caller compacts each summary as it takes it)."""
    pending: deque[Future[R]] = deque(pool.submit(work, item) for item in items[:ahead])
    following = iter(items[ahead:])
    while pending:
        result = pending.popleft().result()
        for item in itertools.islice(following, 1):
            pending.append(pool.submit(work, item))
        yield result


def _node_outcomes(
    store: Store, chosen: list[RankInput], top_n: int, capture_id: str | None, progress: Progress
) -> Iterator[tuple[int, RankOutcome | None, str]]:
    """(index, outcome, refusal) of every chosen rank, in order: from its node's summary, read by NODE_READERS threads
    at once (kilobytes each, and at most READ_AHEAD of them waiting to be taken), or None where its trace must be
    parsed (with why, where its summary was refused). A local folder is read in this thread: there is no latency for
    threads to hide, only their handing over."""
    started = time.perf_counter()
    used = 0
    budget = SummaryBudget(limits.current())
    unused: dict[str, list[str]] = {}  # why -> the ranks it holds for: each reason told once
    local = isinstance(store, LocalStore)
    with ThreadPoolExecutor(1 if local else NODE_READERS) as pool:
        if local:
            read: Iterator[tuple[RankOutcome | None, str, bool]] = (
                read_from_node(store, inp, top_n, capture_id, budget) for inp in chosen
            )
        else:
            read = read_ahead(
                pool, lambda inp: read_from_node(store, inp, top_n, capture_id, budget), chosen, READ_AHEAD
            )
        for index, (outcome, why, refused) in enumerate(read):
            if why:
                unused.setdefault(why, []).append(chosen[index].name)
            if outcome is not None:
                used += 1
            yield index, outcome, why if refused else ""
    for why, names in unused.items():
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        progress(f"{', '.join(names[:3])}{more}: {why}")
    if used:
        elapsed = time.perf_counter() - started
        progress(f"{used} of {len(chosen)} rank(s) summarised on their nodes, read in {elapsed:.2f} s")


def summarise(read: RankRead, store: Store, *, top_n: int = 50) -> RankOutcome:
    """One rank's artifacts -> its outcome; every failure becomes a rank with status error, never an exception."""
    base = _base(read, store)
    early = _without_analysis(read, base)
    if early is not None:
        return early
    assert read.trace is not None
    return _finish(read, store, base, compute(read.trace, read.inp.rank, _rank_in_name(read.inp.name), top_n))


def _processes(outcomes: list[RankOutcome]) -> list[tuple[int, Hashable, RankReport]]:
    """(index, whose, summary) of the analysed traces: whose = the rank a trace claims, else its worker name."""
    out: list[tuple[int, Hashable, RankReport]] = []
    for i, o in enumerate(outcomes):
        if o.skipped is not None or o.summary.status is not RankStatus.OK:
            continue
        whose: Hashable = o.summary.rank if not o.needs_rank else worker_of(o.summary.trace_uri or "")
        if whose is not None:
            out.append((i, whose, o.summary))
    return out


def assign_ranks(outcomes: list[RankOutcome]) -> None:
    """Plain folders: keep each trace's own rank when free; earlier recording cycles of a rank are left out with a
    note (recording_cycles); a rank claimed twice otherwise, and traces without a rank, get the next free numbers
    (with a note for the former)."""
    for index, note in cycles_left_out(_processes(outcomes)).items():
        outcomes[index].skipped = note
    claimed: set[int] = set()
    later: list[RankOutcome] = []
    for o in outcomes:
        if o.skipped is not None:
            continue
        if o.needs_rank or o.summary.rank in claimed:
            later.append(o)
            continue
        claimed.add(o.summary.rank)
    for o in later:
        free = max(claimed, default=-1) + 1
        claimed.add(free)
        if not o.needs_rank:
            source = o.summary.trace_uri or ""
            message = f"{source or 'a trace'} says rank {o.summary.rank}, which another file already holds; "
            o.errors.append(RankError(rank=free, source=source, message=f"{message}listed as rank {free}"))
        else:
            o.numbered = f"{PurePosixPath(o.summary.trace_uri or '?').name} as rank {free}"
        o.summary = o.summary.model_copy(update={"rank": free})
        o.errors = [e.model_copy(update={"rank": free}) for e in o.errors]
        o.needs_rank = False


def _state(outcome: RankOutcome) -> str:
    s = outcome.summary
    return outcome.skipped or (s.status.value if s.status is not RankStatus.OK else f"{s.steps.count} steps")


def summarize_all(
    store: Store,
    layout: Layout,
    *,
    top_n: int = 50,
    progress: Progress = quiet,
    ranks: set[int] | None = None,
    workers: int | None = None,
    while_waiting: Callable[[], object] | None = None,
    capture_id: str | None = None,
) -> list[RankOutcome]:
    """Every chosen rank's outcome, in the layout's order. With more than one worker (default: the CPUs the
    process may use, cpu_quota), traces are parsed and summarised in worker processes (rank_pool) while this
    process reads the next ones; `while_waiting` is then called once the workers have their first traces (as
    rank_pool.compute_all). Each outcome's summary is compacted as it arrives (compact: they are all held at once).
    `capture_id`: the session's (node summaries of another capture are refused)."""
    chosen = [i for i in layout.inputs if ranks is None or i.rank in ranks]
    found = outcomes_of(
        store, chosen, top_n=top_n, progress=progress, workers=workers, wait=while_waiting, capture_id=capture_id
    )
    compactor = Compactor()
    results = {i: replace(o, summary=compactor.compact(o.summary)) for i, o in within_stacks_budget(found)}
    outcomes = [results[i] for i in range(len(chosen))]
    if not layout.session:
        assign_ranks(outcomes)
    return outcomes


def within_stacks_budget(outcomes: Iterable[tuple[int, RankOutcome]]) -> Iterator[tuple[int, RankOutcome]]:
    """The outcomes as they come, the stacks of the hung ranks kept up to max_stacks_total_bytes together: a rank
    beyond it keeps its hang evidence without the stacks, and an error that names the limit."""
    table = limits.current()
    left = table.max_stacks_total_bytes
    for index, outcome in outcomes:
        hang = outcome.hang
        if hang is None or not hang.stacks:
            yield index, outcome
            continue
        size = len(hang.stacks)
        if size <= left:
            left -= size
            yield index, outcome
            continue
        detail = f"rank {hang.rank}'s stacks ({size} characters) are not kept, {left} left"
        error = RankError(rank=hang.rank, message=str(table.exceeded("max_stacks_total_bytes", detail)))
        yield index, replace(outcome, hang=replace(hang, stacks=""), errors=[*outcome.errors, error])


def each_outcome(
    store: Store,
    layout: Layout,
    *,
    top_n: int = 50,
    progress: Progress = quiet,
    workers: int | None = None,
    capture_id: str | None = None,
) -> Iterator[RankOutcome]:
    """Every rank's outcome as soon as it is done (in no set order), none kept here: the map step writes each
    summary and lets it go, so its memory does not grow with the ranks of its shard. Needs a session layout (ranks
    known from the file names)."""
    inputs = list(layout.inputs)
    found = outcomes_of(
        store, inputs, top_n=top_n, progress=progress, workers=workers, wait=None, capture_id=capture_id
    )
    for _, outcome in found:
        yield outcome


def outcomes_of(
    store: Store,
    chosen: list[RankInput],
    *,
    top_n: int,
    progress: Progress,
    workers: int | None,
    wait: Callable[[], object] | None,
    capture_id: str | None = None,
) -> Iterator[tuple[int, RankOutcome]]:
    """Ranks summarised on their nodes first (node_summaries), then the others' traces parsed here (a rank whose
    summary was refused gets an error that says why)."""
    rest = list(range(len(chosen)))
    refused: dict[int, str] = {}
    if node_summaries_enabled() and any(inp.node_summary_key for inp in chosen):
        rest = []
        for index, outcome, why in _node_outcomes(store, chosen, top_n, capture_id, progress):
            if outcome is None:
                rest.append(index)
                if why:
                    refused[index] = why
            else:
                yield index, outcome
    parsed = [chosen[i] for i in rest]
    if not parsed:
        return
    count = workers if workers is not None else pool_size(len(parsed))
    if count > 1:
        here = _in_pool(store, parsed, top_n, count, progress, wait=wait)
    else:
        here = _serial(store, parsed, top_n, progress)
    for index, outcome in here:
        at = rest[index]
        yield at, _with_refusal(outcome, chosen[at], refused.get(at))


def _with_refusal(outcome: RankOutcome, inp: RankInput, why: str | None) -> RankOutcome:
    """`outcome` with an error that says why the rank's node summary was refused (`why` None: unchanged)."""
    if why is None:
        return outcome
    rank = inp.rank if inp.rank is not None else outcome.summary.rank
    error = RankError(rank=rank, source=inp.node_summary_key or "", message=why)
    return replace(outcome, errors=[*outcome.errors, error])


def _serial(store: Store, chosen: list[RankInput], top_n: int, progress: Progress) -> Iterator[tuple[int, RankOutcome]]:
    for n, inp in enumerate(chosen, 1):
        started = time.perf_counter()
        outcome = summarise(read_rank(store, inp), store, top_n=top_n)
        progress(f"[{n}/{len(chosen)}] {inp.name}: {_state(outcome)} in {time.perf_counter() - started:.2f} s")
        yield n - 1, outcome


def _in_pool(
    store: Store,
    chosen: list[RankInput],
    top_n: int,
    workers: int,
    progress: Progress,
    *,
    wait: Callable[[], object] | None,
) -> Iterator[tuple[int, RankOutcome]]:
    finished: list[tuple[int, RankOutcome]] = []  # outcomes known without a worker, handed out between tasks
    waiting: dict[int, tuple[RankRead, dict[str, object]]] = {}
    started = time.perf_counter()
    count = 0

    def done(index: int, outcome: RankOutcome) -> tuple[int, RankOutcome]:
        nonlocal count
        count += 1
        elapsed = time.perf_counter() - started
        progress(f"[{count}/{len(chosen)}] {chosen[index].name}: {_state(outcome)} at {elapsed:.2f} s")
        return index, outcome

    def tasks() -> Iterator[Task]:
        for index, inp in enumerate(chosen):
            read = read_rank(store, inp)
            base = _base(read, store)
            early = _without_analysis(read, base)
            if early is not None:
                finished.append(done(index, early))
                continue
            assert read.trace is not None and inp.trace_key is not None
            trace, read.trace = read.trace, None  # the worker holds the bytes from here on
            waiting[index] = (read, base)
            again = functools.partial(read_bounded, store, inp.trace_key, "max_trace_file_bytes")
            yield Task(index, trace, inp.rank, _rank_in_name(inp.name), again)

    progress(f"analysing {len(chosen)} trace(s) in {workers} worker processes")
    phases.mark("pool requested")
    for index, computed in compute_all(tasks(), work=compute, top_n=top_n, workers=workers, while_waiting=wait):
        while finished:
            yield finished.pop()
        if computed.began is not None:
            phases.mark("first rank began", computed.began)
        read, base = waiting.pop(index)
        yield done(index, _finish(read, store, base, computed))
    while finished:
        yield finished.pop()
