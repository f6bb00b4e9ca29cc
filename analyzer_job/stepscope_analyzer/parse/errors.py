"""The one error type the parser raises for input it cannot analyse."""

from __future__ import annotations


class TraceError(ValueError):
    """A trace that cannot be analysed: truncated, not JSON, missing fields, out-of-range values."""
