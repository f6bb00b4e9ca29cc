"""Splitting a Chrome-trace document into chunks of events without building the whole object tree.

The ``traceEvents`` array is cut at event boundaries (``}`` ``,`` ``{``) every ``chunk_bytes`` and each piece is
parsed on its own with orjson, so at most one chunk of event dicts is alive at a time. A cut is accepted only when
the piece parses as a complete JSON array, which proves the cut is at the array's top level (a cut inside a string or
a nested object leaves the piece unbalanced). Anything unusual falls back to parsing the whole document at once,
which also yields the precise JSON error for invalid input.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import Any

import msgspec
import orjson

from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.schema import EVENTS_DECODER

DEFAULT_CHUNK_BYTES = 4 << 20
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"[}\[]\s*\]")
_MAX_FAILED_CUTS = 32


class CannotSplitError(Exception):
    """The document cannot be cut safely; parse it whole instead."""


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "utf-8" in str(exc).lower() or "surrogate" in str(exc).lower():
            # Names that are not valid UTF-8: keep the trace, replace the bad bytes.
            return orjson.loads(data.decode("utf-8", errors="replace").encode())
        raise


def parse_whole(data: bytes) -> tuple[dict[str, Any], list[Any]]:
    """Parse the whole document at once; return (metadata, events) or raise a precise TraceError."""
    try:
        doc = _loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"invalid JSON: {exc}") from exc
    if isinstance(doc, list):
        return {}, doc
    if not isinstance(doc, dict):
        raise TraceError(f"trace is a JSON {type(doc).__name__}, expected an object with 'traceEvents'")
    events = doc.pop("traceEvents", None)
    if events is None:
        raise TraceError("trace has no 'traceEvents' array")
    if not isinstance(events, list):
        raise TraceError(f"'traceEvents' is a {type(events).__name__}, expected an array")
    return doc, events


def _try_array(piece: bytes) -> list[Any] | None:
    """Decode ``[piece]``: typed structs when every event fits the schema, else plain dicts; None if not JSON."""
    data = b"[" + piece + b"]"
    try:
        return EVENTS_DECODER.decode(data)
    except (msgspec.DecodeError, ValueError):  # ValueError: UnicodeDecodeError on non-UTF-8 bytes
        pass  # not this schema, or not JSON: the generic path decides (and handles non-UTF-8 names)
    try:
        value = _loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


class ChunkedEvents:
    """Iterate the ``traceEvents`` array chunk by chunk; ``metadata`` is set once iteration has finished.

    Raises CannotSplitError (possibly after some chunks were yielded) when the document must be parsed whole.
    """

    def __init__(self, data: bytes, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        self._data = data
        self._chunk_bytes = chunk_bytes
        self.metadata: dict[str, Any] = {}

    def __iter__(self) -> Iterator[list[Any]]:
        data = self._data
        if not data.strip():
            raise TraceError("trace is empty")
        key = _EVENTS_KEY.search(data)
        if key is None or data.lstrip()[:1] != b"{":
            raise CannotSplitError
        close = yield from self._events(key.end())
        try:
            metadata = _loads(data[: key.end()] + data[close:])
        except orjson.JSONDecodeError as exc:
            raise CannotSplitError from exc
        if not isinstance(metadata, dict) or metadata.get("traceEvents") != []:
            raise CannotSplitError
        del metadata["traceEvents"]
        self.metadata = metadata

    def _events(self, start: int) -> Generator[list[Any], None, int]:
        """Yield event chunks from ``start`` (just after ``[``); return the index of the closing ``]``."""
        data = self._data
        pos = start
        size = len(data)
        failed = 0
        while True:
            search_from = pos + self._chunk_bytes
            cut = _BOUNDARY.search(data, search_from) if search_from < size else None
            events: list[Any] | None = None
            while cut is not None:
                events = _try_array(data[pos : cut.start() + 1])
                if events is not None:
                    break
                failed += 1
                if failed > _MAX_FAILED_CUTS:
                    raise CannotSplitError
                cut = _BOUNDARY.search(data, cut.end())
            if cut is None or events is None:
                break
            yield events
            pos = cut.end() - 1  # at the next event's "{"
        # Last piece: find where the array closes.
        if data[pos:].lstrip()[:1] == b"]":
            return data.index(b"]", pos)
        for end in _ARRAY_END.finditer(data, pos):
            if data[end.start()] == ord("["):
                continue
            events = _try_array(data[pos : end.start() + 1])
            if events is not None:
                yield events
                return end.end() - 1
            failed += 1
            if failed > _MAX_FAILED_CUTS:
                break
        raise CannotSplitError
