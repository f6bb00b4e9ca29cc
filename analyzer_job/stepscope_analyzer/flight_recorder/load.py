"""Reading the ranks' Flight Recorder dumps from storage: each one bounded and parsed on its own, so that a bad or
hostile file costs only its own rank's dump (a per-rank error), never the analysis."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from stepscope_analyzer.flight_recorder.dump import Dump, FlightRecorderError, parse_dump
from stepscope_analyzer.storage_io import StorageError, Store
from stepscope_contract.report import RankError
from stepscope_contract.storage import FLIGHT_RECORDER_FILE

READ_WORKERS = 8


def _load_one(store: Store, rank: int, key: str) -> tuple[int, Dump | None, RankError | None]:
    origin = f"rank {rank}'s {FLIGHT_RECORDER_FILE}"
    try:
        dump = parse_dump(store.read(key), origin)
    except (StorageError, FlightRecorderError) as exc:
        return rank, None, RankError(rank=rank, source=key, message=f"{str(exc)[:1500]} (dump not used)")
    info = dump.stepscope
    if info is not None and info.rank is not None and info.rank != rank:
        message = f"{origin} says rank {info.rank}; it is stored as rank {rank} (dump not used)"
        return rank, None, RankError(rank=rank, source=key, message=message)
    return rank, dump, None


def load_dumps(store: Store, keys: Iterable[tuple[int, str]]) -> tuple[dict[int, Dump], list[RankError]]:
    """(rank, key) pairs -> the usable dumps by rank, and one error per rejected file."""
    wanted = list(keys)
    if not wanted:
        return {}, []
    with ThreadPoolExecutor(min(READ_WORKERS, len(wanted))) as pool:
        results = list(pool.map(lambda rk: _load_one(store, rk[0], rk[1]), wanted))
    dumps = {rank: dump for rank, dump, _ in results if dump is not None}
    errors = [error for _, _, error in results if error is not None]
    return dumps, errors
