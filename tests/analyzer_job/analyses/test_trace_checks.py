"""Semantic checks of a rank's event times: an end beyond 2**53 µs or a duration far beyond the trace's own
window is rejected with the event's name; a healthy trace passes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stepscope_analyzer.analyses import summarize_trace
from stepscope_analyzer.parse import TraceError

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _trace_with(dur: float, ts: float | None = None) -> bytes:
    doc = json.loads(gzip.decompress((FIXTURES / "gloo_2rank_rank0.pt.trace.json.gz").read_bytes()))
    victim = next(e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name") == "aten::relu")
    victim["dur"] = dur
    if ts is not None:
        victim["ts"] = ts
    return json.dumps(doc).encode()


def test_an_end_beyond_2_53_is_rejected() -> None:
    # (an absurd duration is already refused by the parser's limit max_event_duration_us: tests/analyzer_job/parse)
    with pytest.raises(TraceError, match=r"'aten::relu'.*2\*\*53"):
        summarize_trace(_trace_with(10.0, ts=2.0**53))


def test_a_duration_far_beyond_the_window_is_rejected() -> None:
    with pytest.raises(TraceError, match=r"'aten::relu'.*far beyond the trace's own window"):
        summarize_trace(_trace_with(3.6e9))  # an hour, in a trace of a fraction of a second


def test_a_healthy_trace_passes() -> None:
    assert summarize_trace(_trace_with(10.0)).steps.count == 4
