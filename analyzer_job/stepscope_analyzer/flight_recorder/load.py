"""Reading the ranks' Flight Recorder dumps from storage, within one budget per analysis.

Each file is read with its stored-size limit (`most=`: an oversized object is refused from its size, before it is
downloaded), inflated within its JSON limit and decoded on its own, one rank at a time, so that at most one rank's
decoded dump exists beside the kept ones; reads run a few files ahead in threads. What is kept is the compacted dump
(dump.compact), charged against the analysis's total budget (limits: max_flight_recorder_total_bytes and
max_flight_recorder_total_entries). A bad or hostile file, or one that does not fit what is left of the budget, costs
only its own rank's dump (a per-rank error naming the limit), never the analysis.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from stepscope_analyzer import limits
from stepscope_analyzer.flight_recorder.dump import Dump, FlightRecorderError, Interner, compact, own_cost, parse_dump
from stepscope_analyzer.ranks.storage_io import StorageError, Store, read_bounded
from stepscope_analyzer.trace_error import TraceError
from stepscope_contract.report import RankError
from stepscope_contract.storage import FLIGHT_RECORDER_FILE

READ_AHEAD = 4
"""files read ahead of the one being decoded (each at most max_flight_recorder_file_bytes)"""


@dataclass
class Budget:
    """What the dumps kept so far may still take, in estimated bytes and in entries."""

    bytes_left: int
    entries_left: int
    interner: Interner

    @classmethod
    def of(cls, table: limits.Limits) -> Budget:
        return cls(table.max_flight_recorder_total_bytes, table.max_flight_recorder_total_entries, Interner())

    def spent(self) -> str | None:
        """The limit with nothing left, if any."""
        if self.entries_left <= 0:
            return "max_flight_recorder_total_entries"
        if self.bytes_left <= 0:
            return "max_flight_recorder_total_bytes"
        return None

    def refusal(self, table: limits.Limits, origin: str, cost: int, entries: int) -> str | None:
        """Why a dump of `cost` bytes and `entries` entries does not fit (None: it fits and is charged)."""
        if entries > self.entries_left:
            detail = f"{origin} holds {entries:,} entries, {max(self.entries_left, 0):,} left of the analysis's"
            return str(table.exceeded("max_flight_recorder_total_entries", detail))
        if cost > self.bytes_left:
            detail = f"{origin} needs ~{cost:,} bytes, {max(self.bytes_left, 0):,} left of the analysis's"
            return str(table.exceeded("max_flight_recorder_total_bytes", detail))
        self.bytes_left -= cost
        self.entries_left -= entries
        return None


def _read(store: Store, key: str) -> bytes | Exception:
    try:
        return read_bounded(store, key, "max_flight_recorder_file_bytes")
    except (StorageError, TraceError) as exc:
        return exc


def _use(rank: int, key: str, raw: bytes | Exception, budget: Budget) -> tuple[Dump | None, RankError | None]:
    table = limits.current()
    origin = f"rank {rank}'s {FLIGHT_RECORDER_FILE}"

    def error(message: str) -> tuple[None, RankError]:
        return None, RankError(rank=rank, source=key, message=f"{message[:1500]} (dump not used)")

    if isinstance(raw, Exception):
        return error(str(raw))
    spent = budget.spent()
    if spent is not None:  # not even read: nothing is left
        return error(str(table.exceeded(spent, f"{origin}: nothing left of the analysis's budget")))
    try:
        parsed = parse_dump(raw, origin, table.max_flight_recorder_json_bytes, table.max_flight_recorder_file_bytes)
    except FlightRecorderError as exc:
        return error(str(exc))
    info = parsed.stepscope
    if info is not None and info.rank is not None and info.rank != rank:
        return error(f"{origin} says rank {info.rank}; it is stored as rank {rank}")
    shared = budget.interner.cost
    dump = compact(parsed, budget.interner)
    del parsed
    grown = budget.interner.cost - shared
    refused = budget.refusal(table, origin, own_cost(dump) + grown, len(dump.entries))
    if refused is not None:
        budget.bytes_left -= grown  # what the interner now holds stays spent
        return error(refused)
    return dump, None


def load_dumps(store: Store, keys: Iterable[tuple[int, str]]) -> tuple[dict[int, Dump], list[RankError]]:
    """(rank, key) pairs -> the usable dumps by rank, and one error per rejected file (in rank order)."""
    wanted = sorted(keys)
    if not wanted:
        return {}, []
    budget = Budget.of(limits.current())
    dumps: dict[int, Dump] = {}
    errors: list[RankError] = []
    with ThreadPoolExecutor(min(READ_AHEAD, len(wanted))) as pool:
        pending: deque[tuple[int, str, Future[bytes | Exception]]] = deque()
        queue = iter(wanted)
        for rank, key in queue:
            pending.append((rank, key, pool.submit(_read, store, key)))
            if len(pending) >= READ_AHEAD:
                break
        while pending:
            rank, key, future = pending.popleft()
            raw = future.result()
            for next_rank, next_key in queue:
                pending.append((next_rank, next_key, pool.submit(_read, store, next_key)))
                break
            dump, error = _use(rank, key, raw, budget)
            del raw, future
            if dump is not None:
                dumps[rank] = dump
            if error is not None:
                errors.append(error)
    return dumps, errors
