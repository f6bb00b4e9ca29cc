"""The one error type the parser raises for input it cannot analyse (and the limits table's, a kind of it).

Outside the parse package so that the limits table (which readers of storage need too) does not load the parser,
numpy included."""

from __future__ import annotations


class TraceError(ValueError):
    """A trace that cannot be analysed: truncated, not JSON, missing fields, out-of-range values."""


__all__ = ["TraceError"]
