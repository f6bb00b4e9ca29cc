"""The one error type the parser raises for input it cannot analyse (defined in trace_error, outside this package)."""

from __future__ import annotations

from stepscope_analyzer.trace_error import TraceError

__all__ = ["TraceError"]
