"""The typed fast path (msgspec structs) and the generic path (orjson dicts) build identical columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from stepscope_analyzer.parse import parse_bytes, read_trace_bytes
from stepscope_analyzer.parse.columns import ColumnBuilder

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("trace", ["sampled_128rank_rank0.json.gz", "nccl_2rank_rank0.json.gz"])
def test_typed_and_generic_paths_agree(hta_traces: Path, trace: str) -> None:
    data = read_trace_bytes(hta_traces / trace)
    fast = parse_bytes(data, chunk_bytes=1 << 20)
    builder = ColumnBuilder()
    builder.add(orjson.loads(data)["traceEvents"])
    slow = builder.finish()
    assert fast.events.names == slow.names and fast.events.cats == slow.cats
    for column in ("name_id", "cat_id", "ts", "dur", "pid", "tid", "stream", "correlation", "external_id"):
        np.testing.assert_array_equal(getattr(fast.events, column), getattr(slow, column), err_msg=column)
    assert fast.events.collective_args == slow.collective_args
    assert fast.events.thread_names == slow.thread_names
    assert fast.events.rounded_ns == slow.rounded_ns


def test_gloo_fixture_paths_agree() -> None:
    data = read_trace_bytes(FIXTURES / "gloo_2rank_rank0.pt.trace.json.gz")
    fast = parse_bytes(data, chunk_bytes=4096)
    builder = ColumnBuilder()
    builder.add(orjson.loads(data)["traceEvents"])
    slow = builder.finish()
    np.testing.assert_array_equal(fast.events.ts, slow.ts)
    assert fast.events.thread_names == slow.thread_names and len(fast.events) == len(slow)
    assert fast.metadata["distributedInfo"]["backend"] == "gloo"


def test_a_null_collective_name_is_no_collective_on_either_path() -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
         "args": {"Collective name": None, "Process Group Name": None, "dtype": "Float"}},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3, "dur": 2,
         "args": {"Collective name": "allreduce", "Group size": None, "dtype": "Float"}},
    ]  # fmt: skip
    typed = parse_bytes(orjson.dumps({"traceEvents": events})).events
    builder = ColumnBuilder()
    builder.add(events)
    generic = builder.finish()
    assert typed.collective_args == generic.collective_args == {1: {"Collective name": "allreduce", "dtype": "Float"}}
