"""The allocator's `[memory]` events on the native scanner's path (their args texts handed over as one JSON array,
decoded in one call, one at a time where a value is not a number's type): the same rows as the Python path's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepscope_analyzer.parse import native, parse_bytes

pytestmark = pytest.mark.unit


def _trace(memory_args: list[dict[str, object]]) -> bytes:
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}
           for i in range(5)]  # fmt: skip
    memory = [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3 + 10 * i, "s": "t", "args": a}
              for i, a in enumerate(memory_args)]  # fmt: skip
    return json.dumps({"traceEvents": ops + memory}).encode()


def _both(data: bytes) -> list[list[tuple[float, float, float, int]]]:
    seen = []
    for on in (True, False):
        with native.enabled(on):
            seen.append(parse_bytes(data).events.memory)
    return seen


NUMBERS = [
    {"Total Allocated": 1024, "Total Reserved": 2048.5, "Device Type": 1, "Addr": 7, "Bytes": 512},
    {"Total Allocated": 2.5e9, "Total Reserved": 3e9, "Device Type": 0},
    {"Total Allocated": None, "Total Reserved": 1, "Device Type": 1},  # no number: left out
    {"Total Reserved": 1},  # no allocated: left out
    {"Total Allocated": 5, "Total Reserved": 6, "Device Type": None, "Device Id": -1},
]


def test_numbers_are_decoded_in_one_call_the_same_as_the_python_path() -> None:
    data = _trace(NUMBERS)
    if native.active():
        scanned = native.scan(json.dumps(json.loads(data)["traceEvents"]).encode())
        assert scanned is not None
        assert np.frombuffer(scanned.columns["memory_ts"]).tolist() == [3.0, 13.0, 23.0, 33.0, 43.0]
        assert json.loads(scanned.columns["memory_args"]) == NUMBERS
    fast, python = _both(data)
    assert fast == python == [(3.0, 1024.0, 2048.5, 1), (13.0, 2.5e9, 3e9, 0), (43.0, 5.0, 6.0, 0)]


def test_a_value_of_another_type_is_decoded_one_event_at_a_time() -> None:
    odd = [*NUMBERS[:2], {"Total Allocated": "12", "Total Reserved": 1, "Device Type": 1}, NUMBERS[4]]
    fast, python = _both(_trace(odd))
    assert fast == python
    assert [m[0] for m in fast] == [3.0, 13.0, 33.0]


def test_a_chunk_without_memory_events_hands_over_nothing() -> None:
    if not native.active():
        pytest.skip("the native scanner is not built")
    scanned = native.scan(b'[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]')
    assert scanned is not None
    assert scanned.columns["memory_ts"] == b"" and scanned.columns["memory_args"] == b""
    fast, python = _both(_trace([]))
    assert fast == python == []
