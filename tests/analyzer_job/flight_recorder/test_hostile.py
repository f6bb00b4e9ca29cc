"""Flight Recorder dumps of hostile size or content: each is bounded while it is read and rejected for its rank
alone, with a message naming the bound; the other ranks' dumps and the verdict still come through."""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fr_dumps import dump, encode, entry, session_folder

from stepscope_analyzer.flight_recorder import FlightRecorderError, parse_dump
from stepscope_analyzer.flight_recorder.dump import MAX_ENTRIES, MAX_JSON_BYTES, MAX_TEXT
from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import flight_recorder_dumps, reduce_outcomes

pytestmark = pytest.mark.unit


def bomb(size: int) -> bytes:
    """A gzip stream of `size` spaces, built without holding them in memory."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 20)
    parts = [packer.compress(b"[")]
    parts += [packer.compress(chunk) for _ in range(size // len(chunk))]
    parts.append(packer.compress(b"]") + packer.flush())
    return b"".join(parts)


def rejected(raw: bytes) -> str:
    with pytest.raises(FlightRecorderError) as info:
        parse_dump(raw, "rank 3's flight_recorder.json.gz")
    return str(info.value)


def test_a_gzip_bomb_is_stopped_at_the_inflate_bound() -> None:
    raw = bomb(MAX_JSON_BYTES + (2 << 20))
    assert len(raw) < 1 << 20
    assert "inflates to more than 67,108,864 bytes" in rejected(raw)


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda d: d.update(entries=[{"process_group": ["0"], "profiling_name": "x"}] * (MAX_ENTRIES + 1)), "50000"),
        (lambda d: d["entries"][0].update(profiling_name="x" * (MAX_TEXT + 1)), "length <= 4096"),
        (lambda d: d["entries"][0].update(collective_seq_id="7"), "Expected `int`"),
        (lambda d: d["entries"][0].update(input_sizes=[[-1]]), ">= 0"),
        (lambda d: d["entries"][0].update(input_sizes=[[1] * 17]), "length <= 16"),
        (lambda d: d["entries"][0].update(frames=[{"name": "f", "filename": "x", "line": 1}] * 65), "length <= 64"),
        (lambda d: d.update(entries={"not": "a list"}), "Expected `array`"),
        (lambda d: d["stepscope"].update(rank=-3), ">= 0"),
    ],
)
def test_content_beyond_a_bound_or_of_the_wrong_shape_is_rejected(mutate: Any, says: str) -> None:
    doc = dump(3, [entry(1), entry(2)])
    mutate(doc)
    message = rejected(encode(doc))
    assert (
        message.startswith("rank 3's flight_recorder.json.gz is not a usable Flight Recorder dump") and says in message
    )


def test_garbage_is_rejected_not_crashed_on() -> None:
    assert "not valid JSON" in rejected(gzip.compress(b'{"version": "2.10", "entries": ['))
    assert "truncated gzip" in rejected(gzip.compress(json.dumps(dump(3, [entry(1)])).encode())[:-20])
    assert "not valid JSON" in rejected(b"\x00\x01binary")
    deep = b"[" * 100_000 + b"]" * 100_000
    assert "flight_recorder.json.gz" in rejected(deep)


def test_one_hostile_dump_costs_only_its_rank_and_the_culprit_is_still_named(tmp_path: Path) -> None:
    folder = session_folder("stuck", tmp_path / "session")
    (folder / "ranks" / "3" / "flight_recorder.json.gz").write_bytes(bomb(MAX_JSON_BYTES + (1 << 20)))
    doc = json.loads(gzip.decompress((folder / "ranks" / "1" / "flight_recorder.json.gz").read_bytes()))
    doc["stepscope"]["rank"] = 0
    (folder / "ranks" / "1" / "flight_recorder.json.gz").write_bytes(encode(doc))  # claims another rank's place
    store = LocalStore()
    layout = discover(store, location_of(str(folder)))
    outcomes = summarize_all(store, layout)
    report = reduce_outcomes(outcomes, include_missing=True, flight_recorder=flight_recorder_dumps(store, layout))
    errors = {e.rank: e.message for e in report.errors if "flight_recorder" in e.message}
    assert "rank 3's flight_recorder.json.gz inflates to more than" in errors[3] and "(dump not used)" in errors[3]
    assert "says rank 0; it is stored as rank 1" in errors[1]
    d = report.diagnosis
    assert d.flight_recorder is not None and d.flight_recorder.ranks == [0, 2]
    # ranks 1 and 3 lost their dumps, but their stacks show them waiting: rank 2 alone is the culprit
    assert [s.rank for s in d.slow_ranks] == [2]
    assert d.verdict.startswith("Hang:") and "stuck_in_data_loader" in d.verdict
