"""Property-based tests of the Kineto parser (hypothesis):
- any bytes, plain or gzip, give a ParsedTrace or a TraceError, never another exception;
- generated traces parse to the same columns in chunks of any size, whole, and gzip-compressed, however often the
  splitter drops the text it has decoded;
- any JSON document gives a ParsedTrace or a TraceError."""

from __future__ import annotations

import contextlib
import gzip
import json
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_analyzer.parse import TraceError, parse_bytes, parse_trace, splitter

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]

names = st.text(min_size=0, max_size=12)
numbers = st.one_of(st.integers(-(2**40), 2**40), st.floats(-1e9, 1e9, allow_nan=False), st.none(), st.text(max_size=3))
event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "M", "i", "s", "f"]), "name": names},
    optional={
        "cat": st.sampled_from(["cpu_op", "kernel", "gpu_memcpy", "user_annotation", "Trace", "python_function"]),
        "ts": st.integers(0, 10**9),
        "dur": st.integers(0, 10**6),
        "pid": st.one_of(st.integers(0, 10), st.text(max_size=4)),
        "tid": st.one_of(st.integers(0, 10), st.text(max_size=4)),
        "args": st.dictionaries(
            st.sampled_from(["stream", "correlation", "External id", "Collective name", "name", "other"]),
            numbers,
            max_size=4,
        ),
    },
)


def _doc(events: list[dict[str, Any]], meta: dict[str, Any]) -> bytes:
    return json.dumps({**meta, "traceEvents": events}).encode()


def _parse_or_error(data: bytes, chunk: int = 256) -> Any:
    try:
        return parse_bytes(data, chunk_bytes=chunk)
    except TraceError as exc:
        return exc


@given(st.binary(max_size=2048), st.booleans())
def test_any_bytes_give_a_trace_or_a_trace_error(data: bytes, compress: bool) -> None:
    with contextlib.suppress(TraceError):
        parse_trace(gzip.compress(data) if compress else data, chunk_bytes=64)


@given(
    st.lists(event, max_size=40),
    st.dictionaries(st.sampled_from(["schemaVersion", "distributedInfo", "deviceProperties"]), numbers, max_size=2),
    st.integers(16, 4096),
)
def test_chunked_whole_and_gzip_parses_agree(events: list[dict[str, Any]], meta: dict[str, Any], chunk: int) -> None:
    data = _doc(events, meta)
    whole = _parse_or_error(data, chunk=1 << 30)
    chunked = _parse_or_error(data, chunk=chunk)
    try:
        zipped: Any = parse_trace(gzip.compress(data), chunk_bytes=chunk)
    except TraceError as exc:
        zipped = exc
    results = [whole, chunked, zipped]
    if any(isinstance(r, TraceError) for r in results):
        assert all(isinstance(r, TraceError) for r in results), results
        return
    for other in (chunked, zipped):
        assert [whole.events.names[i] for i in whole.events.name_id] == [
            other.events.names[i] for i in other.events.name_id
        ]
        np.testing.assert_array_equal(whole.events.ts, other.events.ts)
        np.testing.assert_array_equal(whole.events.dur, other.events.dur)
        np.testing.assert_array_equal(whole.events.stream, other.events.stream)
        assert whole.metadata == other.metadata


@given(
    st.lists(event, min_size=1, max_size=40),
    st.integers(16, 1024),
    st.integers(0, 2048),
)
def test_dropping_decoded_text_at_any_point_changes_nothing(
    events: list[dict[str, Any]], chunk: int, keep: int
) -> None:
    """The splitter drops the text before the chunk it cuts only once it holds over _COMPACT_BYTES of it (4 MiB,
    which only large traces reach): with any threshold, down to dropping after every chunk, the same columns."""
    data = _doc(events, {"schemaVersion": 1})
    usual = _parse_or_error(data, chunk=chunk)
    with mock.patch.object(splitter, "_COMPACT_BYTES", keep):
        dropped = _parse_or_error(data, chunk=chunk)
    if isinstance(usual, TraceError):
        assert isinstance(dropped, TraceError)
        assert str(dropped) == str(usual)
        return
    assert [usual.events.names[i] for i in usual.events.name_id] == [
        dropped.events.names[i] for i in dropped.events.name_id
    ]
    np.testing.assert_array_equal(usual.events.ts, dropped.events.ts)
    np.testing.assert_array_equal(usual.events.dur, dropped.events.dur)
    assert usual.metadata == dropped.metadata


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@given(json_values)
def test_any_json_document_gives_a_trace_or_a_trace_error(doc: Any) -> None:
    for wrapped in (doc, {"traceEvents": doc}, {"traceEvents": [doc]}):
        _parse_or_error(json.dumps(wrapped).encode())
