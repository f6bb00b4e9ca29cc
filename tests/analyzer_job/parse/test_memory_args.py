"""The allocator's `[memory]` events on the native scanner's path (their numbers read by the scanner; where one is
not a plain number or null, the chunk's args texts handed over as one JSON array, decoded in one call, one at a time
where a value is not a number's type): the same rows as the Python path's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepscope_analyzer.parse import native, parse_bytes
from stepscope_analyzer.parse.columns import MEMORY_ROW

pytestmark = pytest.mark.unit


def _trace(memory_args: list[dict[str, object]]) -> bytes:
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}
           for i in range(5)]  # fmt: skip
    memory = [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3 + 10 * i, "s": "t", "args": a}
              for i, a in enumerate(memory_args)]  # fmt: skip
    return json.dumps({"traceEvents": ops + memory}).encode()


def _both(data: bytes) -> list[list[tuple[float, ...]]]:
    seen = []
    for on in (True, False):
        with native.enabled(on):
            seen.append([tuple(row) for row in parse_bytes(data).events.memory.tolist()])
    return seen


NUMBERS = [
    {"Total Allocated": 1024, "Total Reserved": 2048.5, "Device Type": 1, "Addr": 7, "Bytes": 512},
    {"Total Allocated": 2.5e9, "Total Reserved": 3e9, "Device Type": 0},
    {"Total Allocated": None, "Total Reserved": 1, "Device Type": 1},  # no number: left out
    {"Total Reserved": 1},  # no allocated: left out
    {"Total Allocated": 5, "Total Reserved": 6, "Device Type": None, "Device Id": -1},
]


def _scanned(data: bytes) -> dict[str, bytes]:
    head = b'{"traceEvents": '
    assert data.startswith(head)
    scanned = native.scan(data[len(head) : -1])  # the events' text as written (a key twice included)
    assert scanned is not None
    return {k: v for k, v in scanned.columns.items() if k.startswith("memory")}


def test_plain_numbers_are_read_by_the_scanner_the_same_as_the_python_path() -> None:
    data = _trace(NUMBERS)
    if native.active():
        columns = _scanned(data)
        assert columns["memory_ts"] == columns["memory_args"] == b""
        rows = np.frombuffer(columns["memory_rows"], dtype=MEMORY_ROW)
        assert rows["ts"].tolist() == [3.0, 13.0, 23.0, 33.0, 43.0]
        assert rows["device"].tolist() == [1, 0, 1, 0, 0]
    fast, python = _both(data)
    assert fast == python == [(3.0, 1024.0, 2048.5, 1), (13.0, 2.5e9, 3e9, 0), (43.0, 5.0, 6.0, 0)]


@pytest.mark.parametrize(
    "odd",
    [
        {"Total Allocated": "12", "Total Reserved": 1, "Device Type": 1},  # a string: one event at a time
        {"Total Allocated": -0, "Total Reserved": -1.5, "Device Type": 1},  # a sign
        {"Total Allocated": 7, "Total Reserved": 8, "Device Type": 1.0},  # a float device type
        {"Total Allocated": True, "Total Reserved": 8},
        {"Total Allocated": 7, "Total Reserved": 8, "Device Type": [1]},
    ],
)
def test_other_values_hand_the_chunk_s_args_over_as_text(odd: dict[str, object]) -> None:
    events = [*NUMBERS[:2], odd, NUMBERS[4]]
    data = _trace(events)
    if native.active():
        columns = _scanned(data)
        assert columns["memory_rows"] == b""  # the whole chunk one way: the events keep their order
        assert np.frombuffer(columns["memory_ts"]).tolist() == [3.0, 13.0, 23.0, 33.0]
        assert json.loads(columns["memory_args"]) == events
    fast, python = _both(data)
    assert fast == python
    assert [m[0] for m in fast[:2]] == [3.0, 13.0] and fast[-1][0] == 33.0


def test_a_key_twice_is_left_to_the_decoder() -> None:
    text = b'{"Total Allocated": 1, "Total Reserved": 2, "Total Allocated": 3, "Device Type": 1}'
    data = _trace([NUMBERS[0]]).replace(json.dumps(NUMBERS[0]).encode(), text)
    if native.active():
        assert _scanned(data)["memory_rows"] == b""
    fast, python = _both(data)
    assert fast == python and len(fast) == 1


def test_a_chunk_without_memory_events_hands_over_nothing() -> None:
    if not native.active():
        pytest.skip("the native scanner is not built")
    scanned = native.scan(b'[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]')
    assert scanned is not None
    assert all(scanned.columns[k] == b"" for k in ("memory_ts", "memory_args", "memory_rows"))
    fast, python = _both(_trace([]))
    assert fast == python == []
