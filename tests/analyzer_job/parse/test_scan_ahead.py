"""Chunks scanned ahead on threads (parse_trace with scan_threads > 1) give exactly the columns of the one-thread
parse: on a real trace, on a document whose boundary pattern sits inside strings, on names the scanner refuses
(the trace is parsed again without threads), and a truncated or oversized trace fails the same way, leaving no
thread behind."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_analyzer import limits
from stepscope_analyzer.parse import TraceError, kineto, native, parse_trace
from stepscope_analyzer.parse.kineto import ParsedTrace
from stepscope_analyzer.parse.stream import BLOCK_BYTES

pytestmark = pytest.mark.unit

COLUMNS = ("name_id", "cat_id", "ts", "dur", "pid", "tid", "stream", "correlation", "external_id")


def _assert_same(one: ParsedTrace, other: ParsedTrace) -> None:
    a, b = one.events, other.events
    assert a.names == b.names and a.cats == b.cats
    for key in COLUMNS:
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    assert (a.rounded_ns, a.collective_args, a.thread_names, a.labels) == (
        b.rounded_ns,
        b.collective_args,
        b.thread_names,
        b.labels,
    )
    assert one.metadata == other.metadata and one.size_bytes == other.size_bytes


def _event(i: int, name: str) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 1, "tid": 7, "ts": 10.5 * i, "dur": 3.25,
            "args": {"stream": 7, "correlation": i, "External id": i}}  # fmt: skip


def _doc(names: list[str]) -> bytes:
    events = [_event(i, name) for i, name in enumerate(names)]
    return json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": 1}, "traceEvents": events}).encode()


def _attempts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each parse attempt had scanner threads (a refused chunk makes a second attempt without)."""
    seen: list[bool] = []
    original = kineto._parse_raw

    def recorded(raw: bytes, chunk_bytes: int, threaded: bool, scanners: Any) -> ParsedTrace:
        seen.append(scanners is not None)
        return original(raw, chunk_bytes, threaded, scanners)

    monkeypatch.setattr(kineto, "_parse_raw", recorded)
    return seen


def test_a_trace_scanned_ahead_is_the_one_thread_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks cut where they lie: chunks of at least `big` bytes within a block, and one chunk for the event across
    each two blocks (the only text copied); every column as the one-thread parse has it."""
    source = gzip.compress(_doc([f"kernel {i % 50}" for i in range(40_000)]))  # several inflated blocks
    serial = parse_trace(source, chunk_bytes=4096, inflate_thread=False, scan_threads=1)
    attempts = _attempts(monkeypatch)
    scanned: list[tuple[int, int, int]] = []
    scan_items = native.scan_items

    def recorded(text: bytes, start: int, end: int) -> native.ScannedChunk | None:
        scanned.append((len(text), start, end))
        return scan_items(text, start, end)

    monkeypatch.setattr(native, "scan_items", recorded)
    ahead = parse_trace(source, chunk_bytes=4096, inflate_thread=True, scan_threads=3)
    assert attempts == [True]  # every chunk taken by the threads
    in_place = [(start, end) for size, start, end in scanned if size >= BLOCK_BYTES // 2]
    across = [size for size, start, end in scanned if size < BLOCK_BYTES // 2]
    short = [(start, end) for start, end in in_place if end - start < 4 * 4096]
    assert len(in_place) > 20 and len(short) <= len(across) + 1  # a block's last chunk, up to its last boundary
    assert across and max(across) < 1024  # one event and a little more, copied
    _assert_same(serial, ahead)


def _cut_in_strings() -> bytes:
    """Every name holds the cut pattern `}, {`: a cut made there is inside a string, not at the array's top level,
    and the scanner refuses the piece."""
    return _doc([f"op {i % 50} }}, {{ inner" for i in range(30_000)])


def _not_utf8() -> bytes:
    """Far in, a name that is not UTF-8: the scanner leaves its chunk to the Python path (which replaces the byte)."""
    names = [f"kernel {i % 50}" for i in range(30_000)]
    names[25_000] = "bad BYTE name"
    return _doc(names).replace(b"bad BYTE name", b"bad \xff name")


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("make", [_cut_in_strings, _not_utf8])
def test_a_refused_chunk_means_a_second_parse_without_threads_and_the_same_columns(
    make: Any, compress: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make()
    source = gzip.compress(data) if compress else data
    serial = parse_trace(source, chunk_bytes=8192, inflate_thread=False, scan_threads=1)
    attempts = _attempts(monkeypatch)
    ahead = parse_trace(source, chunk_bytes=8192, inflate_thread=True, scan_threads=2)
    assert attempts == [True, False]  # refused, then parsed without threads
    _assert_same(serial, ahead)
    assert ahead.events.ts.size == 30_000


def test_a_truncated_or_oversized_trace_fails_alike_and_leaves_no_thread() -> None:
    data = _doc([f"kernel {i % 50}" for i in range(30_000)])
    packed = gzip.compress(data)
    before = threading.active_count()
    for cut in (len(packed) // 2, len(packed) - 9):
        with pytest.raises(TraceError, match="truncated gzip"):
            parse_trace(packed[:cut], chunk_bytes=8192, inflate_thread=True, scan_threads=2)
    with limits.override(max_events=1000), pytest.raises(TraceError, match="max_events"):
        parse_trace(packed, chunk_bytes=8192, inflate_thread=True, scan_threads=2)
    assert threading.active_count() == before


def test_the_large_hta_trace_scanned_ahead_is_the_one_thread_parse(hta_traces: Path) -> None:
    path = hta_traces / "nccl_2rank_rank1_large.json.gz"
    _assert_same(parse_trace(path, scan_threads=1), parse_trace(path, inflate_thread=True, scan_threads=2))


@pytest.mark.parametrize(
    ("text", "lo", "expected"),
    [
        (b'[{"a": 1}, {"b": {"c": 2}},{"d": 3}', 1, 26),  # the last boundary, not the nested "{"
        (b'[{"a": 1}\n ,\t\r\n{"b": 2}', 1, 11),  # JSON whitespace around the comma
        (b'[{"a": 1}, {"b": 2}', 9, -1),  # the "}" before `lo`
        (b'[{"a": 1}, {"b": 2}', 8, 9),
        (b'[{"a": 1} ; {"b": 2}', 1, -1),  # not a comma
        (b'[{"a": 1},\x0c{"b": 2}', 1, -1),  # form feed is not JSON whitespace
        (b'[{"a": {"b": 1}}]', 1, -1),
    ],
)
def test_the_last_cut_is_the_last_boundary_at_the_array_level_or_none(text: bytes, lo: int, expected: int) -> None:
    from stepscope_analyzer.parse.splitter import _last_cut

    assert _last_cut(text, lo) == expected
    if expected >= 0:
        assert text[expected : expected + 1] == b","


@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=60),
    big=st.integers(16, 4000),
    indent=st.sampled_from([None, 1]),
    skip=st.integers(0, 3),
)
def test_block_cuts_cut_chunks_of_at_least_big_bytes_and_leave_no_boundary_behind(
    sizes: list[int], big: int, indent: int | None, skip: int
) -> None:
    """A block's cuts from one of its event boundaries (`skip` events in): each chunk a whole number of events, each
    but the last at least `big` bytes, and no boundary left after the last cut."""
    from stepscope_analyzer.parse.splitter import _block_cuts, _last_cut

    events = [{"name": "x" * size, "args": {"n": {"m": i}}} for i, size in enumerate(sizes)]
    text = json.dumps(events, indent=indent).encode()[:-1]  # from "[", without the array's "]"
    boundaries = list(_block_cuts(text, 0, 1))  # every boundary's ","
    at = ([0, *boundaries])[min(skip, len(boundaries))]
    ends = list(_block_cuts(text, at, big))
    starts = [at, *ends]
    for start, end in zip(starts, ends, strict=False):
        assert text[end : end + 1] == b","
        json.loads(b"[" + text[start + 1 : end] + b"]")  # a whole number of events
    assert all(end - start >= big for start, end in zip(starts, ends[:-1], strict=False))
    assert _last_cut(text, starts[-1] + 1) == -1  # nothing left to cut after the last end
    assert len(boundaries) == len(events) - 1
    assert bool(ends) == (len(boundaries) > min(skip, len(boundaries)))
