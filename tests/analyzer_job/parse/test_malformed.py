"""Malformed and unusual inputs: a clear TraceError, or correct handling, never another exception."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from stepscope_analyzer.parse import TraceError, parse_bytes, parse_trace

pytestmark = pytest.mark.unit


def _event(name: str, ts: Any, dur: Any, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def _doc(events: list[Any], **meta: Any) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events, **meta}).encode()


GOOD = _doc([_event("k", 10, 5, stream=7, correlation=1)], distributedInfo={"rank": 3, "world_size": 4})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (gzip.compress(GOOD, mtime=0)[:-20], "truncated gzip"),
        (gzip.compress(GOOD, mtime=0)[:12], "truncated gzip"),
        (GOOD[:-7], "invalid JSON"),
        (b"{not json", "invalid JSON"),
        (b"", "empty"),
        (b"   \n", "empty"),
        (b'{"schemaVersion": 1}', "no 'traceEvents'"),
        (b'{"traceEvents": {"a": 1}}', "expected an array"),
        (b'"just a string"', "expected an object"),
        (_doc([_event("k", None, 5)]), "has no 'ts'"),
        (_doc([{"ph": "X", "cat": "cpu_op", "name": "a", "dur": 3}]), "has no 'ts'"),
        (_doc([_event("k", "soon", 5)]), "non-numeric 'ts'"),
        (_doc([_event("k", 1, -5)]), "negative 'dur'"),
        (_doc([_event("k", 1, 5, correlation=1 << 70)]), "out of"),
        (_doc([_event("k", 1, 5, stream=3, correlation=(1 << 63) + 5)]), "out of"),
        (_doc([_event("k", 1 << 70, 5)]), r"out-of-range 'ts'|2\*\*53"),
        (_doc([_event("k", 1.7e19, 5.5)]), r"2\*\*53"),
        (_doc([5, "x"]), "expected an object"),
        (_doc([{"ph": "M", "name": "process_name"}]), "no complete events"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_malformed_input_gives_trace_error(data: bytes, message: str) -> None:
    from stepscope_analyzer.analyses import summarize_trace

    with pytest.raises(TraceError, match=message):
        summarize_trace(data)
    assert issubclass(TraceError, ValueError)


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read trace"):
        parse_trace(tmp_path / "absent.json.gz")


def test_events_without_dur_or_cat_are_not_complete_events() -> None:
    events = [
        _event("kept", 1, 2),
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 3},
        {"ph": "X", "name": "no-cat", "ts": 3, "dur": 1},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 0, "dur": 100},
        {"ph": "s", "id": 4, "cat": "ac2g", "name": "ac2g", "ts": 3},
    ]
    cols = parse_bytes(_doc(events)).events
    assert [cols.names[i] for i in cols.name_id] == ["kept"]


def test_float_ns_timestamps_are_rounded_like_hta() -> None:
    cols = parse_bytes(_doc([_event("a", 100.4, 10.3), _event("b", 200.0, 0.2), _event("c", 300, 5)])).events
    # ts = ceil(ts), end = floor(ts + dur), dur = end - ts
    assert cols.ts.tolist() == [101.0, 200.0, 300.0]
    assert cols.dur.tolist() == [9.0, 0.0, 5.0]
    assert cols.rounded_ns


def test_integer_timestamps_are_kept_exactly() -> None:
    big = 1_669_783_687_352_244
    cols = parse_bytes(_doc([_event("a", big, 7)])).events
    assert cols.ts[0] == big and cols.dur[0] == 7 and not cols.rounded_ns


def test_non_utf8_names_are_replaced_not_fatal() -> None:
    raw = _doc([_event("PLACEHOLDER", 1, 2)]).replace(b"PLACEHOLDER", b"bad\xff\xfename")
    cols = parse_bytes(raw).events
    assert cols.names[int(cols.name_id[0])] == "bad\ufffd\ufffdname"


def test_non_integer_stream_and_string_pid_follow_hta() -> None:
    ev = _event("k", 1, 2, stream="x", correlation=4)
    ev["pid"] = "Spans"
    cols = parse_bytes(_doc([ev, _event("k", 5, 2, stream="9", correlation=5)])).events
    assert cols.stream.tolist() == [-1, 9]
    assert cols.pid[0] < -1 and cols.labels[int(cols.pid[0])] == "Spans"


def test_top_level_array_of_events_is_accepted() -> None:
    cols = parse_bytes(json.dumps([_event("k", 1, 2)]).encode()).events
    assert len(cols) == 1


def _tricky_events(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        name = ["plain", 'str "}, {" inside', "close ] bracket }]", "unicode é 名"][i % 4]
        ev = _event(f"{name} {i}", i * 10, 3, stream=7, correlation=i, nested=[{"a": [1, {"b": "},{"}]}, {"c": 2}])
        out.append(ev)
    return out


@pytest.mark.parametrize("layout", ["kineto", "compact", "metadata_after"])
def test_chunked_parse_equals_whole_parse(layout: str) -> None:
    events = _tricky_events(400)
    meta = {"deviceProperties": [{"id": 0, "name": "x]"}, {"id": 1}], "distributedInfo": {"rank": 1}}
    if layout == "kineto":
        data = json.dumps({"schemaVersion": 1, **meta, "traceEvents": events}, indent=2).encode()
    elif layout == "compact":
        data = orjson.dumps({**meta, "traceEvents": events})
    else:
        data = json.dumps({"traceEvents": events, **meta, "traceName": "t ] }, {"}).encode()
    whole = parse_bytes(data, chunk_bytes=1 << 30)
    chunked = parse_bytes(data, chunk_bytes=97)
    assert chunked.metadata == whole.metadata
    assert chunked.rank == 1
    assert whole.events.names == chunked.events.names
    for column in ("name_id", "ts", "dur", "stream", "correlation"):
        np.testing.assert_array_equal(getattr(whole.events, column), getattr(chunked.events, column))
    assert len(chunked.events) == 400


def test_empty_event_array() -> None:
    with pytest.raises(TraceError, match="no complete events"):
        from stepscope_analyzer.analyses import summarize_trace

        summarize_trace(b'{"traceEvents": [ ], "distributedInfo": {"rank": 0}}')
    assert len(parse_bytes(b'{"traceEvents": [ ], "x": [1]}').events) == 0


def _big_doc(n: int = 20000) -> bytes:
    return _doc([_event(f"kernel {i % 50}", i * 10, 3, stream=7, correlation=i) for i in range(n)])


def test_gzip_truncated_mid_stream_after_chunks_were_parsed() -> None:
    import threading

    from stepscope_analyzer.analyses import summarize_trace

    packed = gzip.compress(_big_doc())
    before = threading.active_count()
    for cut in (len(packed) // 2, len(packed) - 9):
        with pytest.raises(TraceError, match="truncated gzip"):
            summarize_trace(packed[:cut])
    assert threading.active_count() == before  # the inflating thread is gone


@pytest.mark.parametrize("inflate_thread", [True, False])
def test_gzip_inflated_on_its_own_thread_or_between_chunks_reads_the_same(
    inflate_thread: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    started: list[str] = []
    start = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", recorded)
    doc = _big_doc()
    plain = parse_bytes(doc, chunk_bytes=50_000).events
    streamed = parse_trace(gzip.compress(doc), chunk_bytes=50_000, inflate_thread=inflate_thread, scan_threads=1).events
    np.testing.assert_array_equal(plain.ts, streamed.ts)
    np.testing.assert_array_equal(plain.correlation, streamed.correlation)
    assert started == (["stepscope-inflate"] if inflate_thread else [])
    with pytest.raises(TraceError, match="truncated gzip"):
        parse_trace(gzip.compress(doc)[:-9], chunk_bytes=50_000, inflate_thread=inflate_thread)


def test_streamed_gzip_equals_plain_and_multi_member_gzip_is_read(tmp_path: Path) -> None:
    doc = _big_doc()
    plain = parse_bytes(doc, chunk_bytes=50_000).events
    path = tmp_path / "t.pt.trace.json.gz"
    half = len(doc) // 2
    path.write_bytes(gzip.compress(doc[:half]) + gzip.compress(doc[half:]))
    streamed = parse_trace(path, chunk_bytes=50_000).events
    np.testing.assert_array_equal(plain.ts, streamed.ts)
    np.testing.assert_array_equal(plain.correlation, streamed.correlation)
    assert len(streamed) == 20000


def test_garbage_after_gzip_stream_is_an_error() -> None:
    with pytest.raises(TraceError, match="trailing garbage"):
        parse_trace(gzip.compress(GOOD) + b"garbage!")


def test_unknown_or_missing_phase_falls_back_to_the_generic_path() -> None:
    odd = _event("odd", 5, 1, stream=7, correlation=2)
    odd["ph"] = "Z"
    no_ph = _event("no-ph", 9, 1)
    del no_ph["ph"]
    flow = {"ph": "f", "id": 1, "cat": "ac2g", "name": "ac2g", "ts": 4, "bp": "e"}
    cols = parse_bytes(_doc([_event("x", 1, 2), flow, odd, no_ph]), chunk_bytes=64).events
    assert [cols.names[i] for i in cols.name_id] == ["x", "odd", "no-ph"]
    assert cols.correlation.tolist() == [-1, 2, -1]
