"""Property tests (hypothesis) of the Flight Recorder readers over bent dumps and raw bytes:
- any bytes give a Dump or a FlightRecorderError, never another exception;
- compaction keeps the calls the analysis reads (rank_calls of the compacted dump equals that of the parsed one);
- any set of decodable dumps is analysed without an exception, and the findings only name ranks that exist;
- load_dumps over any files gives dumps and per-rank errors covering every rank, within a tiny total budget too."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope_analyzer import limits
from stepscope_analyzer.flight_recorder import FlightRecorderError, analyse, load_dumps, parse_dump
from stepscope_analyzer.flight_recorder.calls import rank_calls
from stepscope_analyzer.flight_recorder.dump import Dump, Interner, compact
from stepscope_analyzer.ranks.storage_io import LocalStore
from stepscope_testing.hostile_inputs import encoded, fr_dump

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]
QUICK = settings(max_examples=max(20, settings.default.max_examples // 3))  # a few seconds each in make test


def _parsed(raw: bytes) -> Dump | None:
    try:
        return parse_dump(raw, "rank 0's flight_recorder.json.gz")
    except FlightRecorderError:
        return None


@given(encoded(fr_dump()))
def test_any_bytes_give_a_dump_or_its_error(raw: bytes) -> None:
    dump = _parsed(raw)
    if dump is not None:
        assert len(dump.entries) <= 50_000


@QUICK
@given(fr_dump())
def test_compaction_keeps_the_calls(doc: dict[str, object]) -> None:
    dump = _parsed(json.dumps(doc).encode())
    if dump is None:
        return
    assert rank_calls(0, compact(dump, Interner())) == rank_calls(0, dump)


@QUICK
@given(st.dictionaries(st.integers(0, 7), fr_dump(), max_size=4), st.integers(1, 16) | st.none())
def test_any_dumps_are_analysed(docs: dict[int, dict[str, object]], world: int | None) -> None:
    interner = Interner()
    dumps = {}
    for rank, doc in docs.items():
        dump = _parsed(gzip.compress(json.dumps(doc).encode()))
        if dump is not None:
            dumps[rank] = compact(dump, interner)
    findings = analyse(dumps, world)
    assert set(findings.ranks) == set(dumps)
    assert all(r >= 0 for r in findings.culprits)


@QUICK
@given(st.lists(encoded(fr_dump()), min_size=1, max_size=4), st.integers(1, 4000))
def test_loading_names_every_rank(files: list[bytes], budget: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        keys = []
        for rank, raw in enumerate(files):
            path = Path(folder) / f"{rank}.json.gz"
            path.write_bytes(raw)
            keys.append((rank, str(path)))
        with limits.override(max_flight_recorder_total_bytes=budget):
            dumps, errors = load_dumps(LocalStore(), keys)
    assert set(dumps) | {e.rank for e in errors} == set(range(len(files)))
    assert set(dumps).isdisjoint({e.rank for e in errors})
