"""Every rank read once into the ranks table, and only the ranks the diagnosis compares held in full.

Pass one reads every rank's outcome as it comes (pipeline._outcomes) and keeps of it its row of compact numbers
(facts.FactsTable) and its errors. Every rank that was not analysed (error, missing, hung) is kept whole: it is
small and the report names it. Analysed ranks are kept whole too while there are at most `budget` of them (the
diagnosis of a job of that size reads every rank in full, as it always has). Past the budget the analysed ranks are
let go, each with how to read it again: a rank summarised on its node from its summary.json (read again from
storage), a rank whose trace was parsed here from a spool file of its compressed summary (the parse is not redone).
Pass two (`gather`'s end) reads again the ranks ranks/candidates.py chooses from the table. Memory: the table, the
ranks not analysed, and `budget` summaries at most, whatever the number of ranks.
"""

from __future__ import annotations

import gc
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import IO

from stepscope_analyzer.ranks.candidates import FULL_COMPARE, compared_rows
from stepscope_analyzer.ranks.compact import Compactor
from stepscope_analyzer.ranks.discovery import Layout, RankInput
from stepscope_analyzer.ranks.facts import FactsTable
from stepscope_analyzer.ranks.pipeline import (
    Progress,
    RankOutcome,
    assign_ranks,
    outcomes_of,
    quiet,
    read_from_node,
    within_stacks_budget,
)
from stepscope_analyzer.ranks.storage_io import Store
from stepscope_contract.report import RankError, RankReport, RankStatus

__all__ = ["Gathered", "Spool", "gather", "gather_all", "gathered_from"]


@dataclass
class Gathered:
    """What the reduce holds: the table of every rank, the ranks held in full, and the errors of the others."""

    table: FactsTable
    outcomes: list[RankOutcome]
    """every rank not analysed, and the analysed ranks the diagnosis compares"""
    errors: list[RankError] = field(default_factory=list)
    """errors of ranks let go after pass one (their outcome is not among `outcomes`)"""
    sampled: bool = False
    """True: more analysed ranks than the budget, `outcomes` holds the chosen ones"""


class Spool:
    """Summaries of ranks parsed here, compressed in a temporary file, read back by key."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="stepscope-spool-")  # noqa: SIM115 (closed by close)
        self._at: dict[int, tuple[int, int]] = {}

    def put(self, key: int, summary: RankReport) -> None:
        data = zlib.compress(type(summary).__pydantic_serializer__.to_json(summary), 1)
        self._file.seek(0, 2)
        self._at[key] = (self._file.tell(), len(data))
        self._file.write(data)

    def __contains__(self, key: int) -> bool:
        return key in self._at

    def get(self, key: int) -> RankReport:
        offset, size = self._at[key]
        self._file.seek(offset)
        return RankReport.model_validate_json(zlib.decompress(self._file.read(size)))

    def close(self) -> None:
        self._file.close()


def _ok(outcome: RankOutcome) -> bool:
    return outcome.skipped is None and outcome.summary.status is RankStatus.OK


def gathered_from(outcomes: list[RankOutcome], budget: int = FULL_COMPARE) -> Gathered:
    """Outcomes already held (plain folders, whose ranks are numbered once all are read) as the reduce holds them:
    the analysed ranks past the budget let go but for the chosen ones."""
    table = FactsTable()
    rows: dict[int, int] = {}
    for i, o in enumerate(outcomes):
        if o.skipped is None:
            rows[i] = len(table)
            table.add(o.summary)
    chosen = set(compared_rows(table, budget))
    kept: list[RankOutcome] = []
    errors: list[RankError] = []
    for i, o in enumerate(outcomes):
        if not _ok(o) or rows[i] in chosen:
            kept.append(o)
        else:
            errors += o.errors
    return Gathered(table, kept, errors, sampled=len(kept) < len(outcomes))


class _Pass:
    """Pass one's state: the table, the outcomes held, and how to read again those let go."""

    def __init__(self, budget: int, reread_all: bool, expected: int) -> None:
        self.budget = budget
        self.hold_first = expected <= budget
        """a layout of more ranks than the budget: no analysed rank held in pass one (most would be let go)"""
        self.reread_all = reread_all
        self.table = FactsTable()
        self.held: dict[int, RankOutcome] = {}
        self.row_of: dict[int, int] = {}
        self.from_node: dict[int, bool] = {}
        self.errors: list[RankError] = []
        self.spool = Spool()
        self.analysed = 0

    def _hold(self, index: int, outcome: RankOutcome) -> None:
        self.held[index] = outcome

    def _let_go(self, index: int, outcome: RankOutcome) -> None:
        self.errors += outcome.errors
        if not self.from_node[index]:
            self.spool.put(index, outcome.summary)

    def take(self, index: int, outcome: RankOutcome) -> None:
        if outcome.skipped is not None:
            self.held[index] = outcome
            return
        self.row_of[index] = len(self.table)
        self.table.add(outcome.summary)
        if not _ok(outcome):
            self._hold(index, outcome)
            return
        self.analysed += 1
        self.from_node[index] = outcome.from_node or self.reread_all
        if self.analysed <= self.budget and self.hold_first:
            self._hold(index, outcome)
            return
        self._let_go(index, outcome)
        if self.analysed == self.budget + 1:  # past the budget: the analysed ranks held so far are let go too
            for i in [i for i, o in self.held.items() if _ok(o)]:
                self._let_go(i, self.held.pop(i))

    def second(self, chosen: list[RankInput], reread: Callable[[RankInput], RankOutcome | None]) -> Gathered:
        """Pass two: the chosen analysed ranks read again."""
        if self.analysed <= self.budget and self.hold_first:
            return Gathered(self.table, [self.held[i] for i in sorted(self.held)])
        wanted = set(compared_rows(self.table, self.budget))
        for index, row in self.row_of.items():
            if row not in wanted or index in self.held:
                continue
            again = reread(chosen[index]) if self.from_node[index] else None
            if again is None and index in self.spool:
                again = RankOutcome(self.spool.get(index))
            if again is None:  # its summary changed or went away since pass one: compared without it
                self.errors.append(RankError(rank=self.table.ints["rank"][row], message="not read again in full"))
                continue
            self._hold(index, replace(again, errors=[]))
        sampled = len(wanted) < self.analysed
        return Gathered(self.table, [self.held[i] for i in sorted(self.held)], self.errors, sampled=sampled)


def gather(
    found: Iterable[tuple[int, RankOutcome]],
    chosen: list[RankInput],
    reread: Callable[[RankInput], RankOutcome | None],
    *,
    budget: int = FULL_COMPARE,
    on_outcome: Callable[[RankOutcome], None] | None = None,
    reread_all: bool = False,
) -> Gathered:
    """Pass one over `found` ((index into `chosen`, outcome) as they come), then pass two: the chosen analysed
    ranks read again (`reread`: a rank summarised on its node, or any rank with `reread_all`; None when it cannot
    be: the spool's copy). `on_outcome` sees every outcome as it arrives (the session Job stores the summaries it
    parsed)."""
    state = _Pass(budget, reread_all, len(chosen))
    try:
        with _collections_paused():
            for index, outcome in found:
                if on_outcome is not None:
                    on_outcome(outcome)
                state.take(index, outcome)
            return state.second(chosen, reread)
    finally:
        state.spool.close()


@contextmanager
def _collections_paused() -> Iterator[None]:
    """Python's automatic cyclic collections paused while the ranks are read, resumed after (as they were). Reading
    makes no reference cycles (a summary is a tree of models, lists and dicts, freed by reference counting when let
    go), but it makes many objects, and each collection of the oldest generation walks every object alive: the
    summaries pass two holds among them."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def gather_all(
    store: Store,
    layout: Layout,
    *,
    top_n: int = 50,
    progress: Progress = quiet,
    workers: int | None = None,
    while_waiting: Callable[[], object] | None = None,
    on_outcome: Callable[[RankOutcome], None] | None = None,
    budget: int = FULL_COMPARE,
    reread: Callable[[RankInput], RankOutcome | None] | None = None,
    capture_id: str | None = None,
) -> Gathered:
    """Every rank of the layout read (pipeline), held as the reduce holds them. A session layout is read in two
    passes; a plain folder's traces are all held first (its ranks are numbered from what every trace says).
    `reread`: how pass two reads any rank again (the session Job: from the summaries it stored), instead of a
    rank's node summary and the spool. `capture_id`: the session's (node summaries of another capture are refused,
    in both passes)."""
    chosen = list(layout.inputs)
    found = within_stacks_budget(
        outcomes_of(
            store, chosen, top_n=top_n, progress=progress, workers=workers, wait=while_waiting, capture_id=capture_id
        )
    )
    if not layout.session:
        compactor = Compactor()  # a plain folder's ranks are all held until they are numbered
        results = {i: replace(o, summary=compactor.compact(o.summary)) for i, o in found}
        outcomes = [results[i] for i in range(len(chosen))]
        assign_ranks(outcomes)
        if on_outcome is not None:
            for o in outcomes:
                on_outcome(o)
        return gathered_from(outcomes, budget)
    again = reread or (lambda inp: read_from_node(store, inp, top_n, capture_id)[0])
    gathered = gather(found, chosen, again, budget=budget, on_outcome=on_outcome, reread_all=reread is not None)
    progress(f"{len(gathered.table)} rank(s) read; {len(gathered.outcomes)} held in full"
             + (" (the ranks the diagnosis compares)" if gathered.sampled else ""))  # fmt: skip
    return gathered
