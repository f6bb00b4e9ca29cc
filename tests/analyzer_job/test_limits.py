"""The analyzer's table of limits and the missing-rank ranges (pure)."""

from __future__ import annotations

import gzip

import pytest

from stepscope_analyzer import limits
from stepscope_analyzer.parse import TraceError, parse_bytes, parse_trace
from stepscope_analyzer.reduce import missing

pytestmark = pytest.mark.unit


def test_limits_come_from_the_environment_and_must_be_positive() -> None:
    table = limits.Limits.from_env({"STEPSCOPE_LIMIT_MAX_EVENTS": "10", "OTHER": "1"})
    assert table.max_events == 10 and table.max_world_size == limits.Limits().max_world_size
    with pytest.raises(ValueError, match="positive"):
        limits.Limits.from_env({"STEPSCOPE_LIMIT_MAX_STEPS": "0"})
    message = str(table.exceeded("max_events", "11 events"))
    assert "max_events=10" in message and "STEPSCOPE_LIMIT_MAX_EVENTS" in message


def test_the_inflate_cap_is_the_ratio_above_a_floor_and_never_beyond_the_total() -> None:
    table = limits.Limits(max_inflated_bytes=1000, max_inflate_ratio=10, min_ratio_checked_bytes=100)
    assert table.inflate_cap(5) == (100, "max_inflate_ratio")
    assert table.inflate_cap(50) == (500, "max_inflate_ratio")
    assert table.inflate_cap(500) == (1000, "max_inflated_bytes")


def test_missing_ranges_are_computed_from_the_ranks_present() -> None:
    ranges = missing.missing_ranges([0, 1, 5, 9, 12], 10)
    assert ranges == [(2, 4), (6, 8)] and missing.count(ranges) == 6
    assert missing.rank_set_text(ranges) == "2-4,6-8" and missing.first(ranges, 4) == [2, 3, 4, 6]
    assert missing.missing_ranges([], 3) == [(0, 2)] and missing.missing_ranges([0, 1, 2], 3) == []
    assert missing.count(missing.missing_ranges([7], 2_000_000)) == 1_999_999


def _doc(events: str) -> bytes:
    return b'{"traceEvents": [' + events.encode() + b"]}"


def test_each_parser_bound_names_its_limit() -> None:
    ev = '{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": 1, "tid": 1, "ts": %d, "dur": 1}'
    many = ",".join(ev % (f"n{i}", i) for i in range(50))
    cases = [
        ({"max_events": 10}, _doc(many), "max_events"),
        ({"max_distinct_names": 10}, _doc(many), "max_distinct_names"),
        ({"max_name_chars_total": 20}, _doc(many), "max_name_chars_total"),
        ({"max_steps": 2}, _doc(",".join(ev % (f"ProfilerStep#{i}", i) for i in range(3))), "max_steps"),
        ({"max_event_bytes": 64}, _doc(ev % ("a", 1) + " " * 5000 + "," + ev % ("b", 2)), "max_event_bytes"),
        ({"max_inflated_bytes": 100}, _doc(many), "max_inflated_bytes"),
    ]
    for values, data, name in cases:
        with limits.override(**values), pytest.raises(limits.LimitExceededError, match=name):
            parse_bytes(data, chunk_bytes=64)
    with limits.override(max_inflate_ratio=2, min_ratio_checked_bytes=1), pytest.raises(TraceError, match="ratio"):
        parse_trace(gzip.compress(_doc(many)))


def test_long_names_are_cut_with_a_hash_and_stay_distinct() -> None:
    ev = '{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": 1, "tid": 1, "ts": %d, "dur": 1}'
    with limits.override(max_name_chars=40):
        cols = parse_bytes(_doc(ev % ("x" * 100 + "1", 1) + "," + ev % ("x" * 100 + "2", 2))).events
    assert len(cols.names) == 2 and cols.names[0] != cols.names[1] and all(len(n) <= 40 for n in cols.names)
