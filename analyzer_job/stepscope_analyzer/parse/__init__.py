"""Fast Kineto Chrome-trace parsing into columnar numpy arrays."""

from stepscope_analyzer.parse.columns import TraceColumns
from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.kineto import ParsedTrace, parse_bytes, parse_trace
from stepscope_analyzer.parse.source import read_trace_bytes

__all__ = ["ParsedTrace", "TraceColumns", "TraceError", "parse_bytes", "parse_trace", "read_trace_bytes"]
