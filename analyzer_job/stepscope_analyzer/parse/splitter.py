"""Splitting a Chrome-trace document into chunks of events without building the whole object tree.

The decompressed text arrives in blocks. The ``traceEvents`` array is cut at event boundaries (``}`` ``,`` ``{``)
about every ``chunk_bytes`` and each piece is decoded on its own, so at most a few chunks of text and one chunk of
decoded events are alive at a time. A cut is accepted only when the piece decodes as a complete JSON array, which
proves the cut is at the array's top level (a cut inside a string or a nested object leaves the piece unbalanced).
Anything unusual raises CannotSplitError and the caller parses the whole document at once, which also yields the
precise JSON error for invalid input.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Iterator
from typing import Any

import msgspec
import orjson

from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.schema import EVENTS_DECODER

DEFAULT_CHUNK_BYTES = 2 << 20
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]")
_MAX_FAILED_CUTS = 32
_MAX_PREFIX_BYTES = 64 << 20


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
    if not data.strip():
        raise TraceError("trace is empty")
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
        events: list[Any] = EVENTS_DECODER.decode(data)
        return events
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

    def __init__(self, blocks: Iterable[bytes], chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        self._blocks = iter(blocks)
        self._chunk_bytes = chunk_bytes
        self._buf = b""
        self._eof = False
        self.metadata: dict[str, Any] = {}
        self.size_bytes = 0

    def _more(self) -> bool:
        """Append the next block to the buffer; False at the end of input."""
        if self._eof:
            return False
        block = next(self._blocks, None)
        if block is None:
            self._eof = True
            return False
        self.size_bytes += len(block)
        self._buf += block
        return True

    def __iter__(self) -> Iterator[list[Any]]:
        # Phase 1: the text before the events array (kept for the metadata).
        key = _EVENTS_KEY.search(self._buf)
        while key is None:
            searched = len(self._buf)
            if searched > _MAX_PREFIX_BYTES or not self._more():
                if not self._buf.strip():
                    raise TraceError("trace is empty")
                raise CannotSplitError
            key = _EVENTS_KEY.search(self._buf, max(0, searched - 64))
        if self._buf.lstrip()[:1] != b"{":
            raise CannotSplitError
        prefix = self._buf[: key.end()]
        self._buf = self._buf[key.end() :]
        tail = yield from self._events()
        try:
            metadata = _loads(prefix + tail)
        except orjson.JSONDecodeError as exc:
            raise CannotSplitError from exc
        if not isinstance(metadata, dict) or metadata.get("traceEvents") != []:
            raise CannotSplitError
        del metadata["traceEvents"]
        self.metadata = metadata

    def _events(self) -> Generator[list[Any], None, bytes]:
        """Yield event chunks; return the text from the array's closing ``]`` to the end of the document."""
        failed = 0
        want = self._chunk_bytes
        while True:
            while len(self._buf) < want + (1 << 16) and self._more():
                pass
            if len(self._buf) < want:
                break  # the end of input is near: the last piece holds the array's end
            cut = _BOUNDARY.search(self._buf, want)
            if cut is None:
                if self._eof:
                    break
                want = len(self._buf)  # one event longer than a chunk: read on
                continue
            events = _try_array(self._buf[: cut.start() + 1])
            if events is None:
                failed += 1
                if failed > _MAX_FAILED_CUTS:
                    raise CannotSplitError
                want = cut.end()
                continue
            yield events
            self._buf = self._buf[cut.end() - 1 :]  # from the next event's "{"
            want = self._chunk_bytes
        while self._more():
            pass
        buf = self._buf
        if buf.lstrip()[:1] == b"]":
            return buf[buf.index(b"]") :]
        for end in _ARRAY_END.finditer(buf):
            events = _try_array(buf[: end.start() + 1])
            if events is not None:
                yield events
                return buf[end.end() - 1 :]
            failed += 1
            if failed > _MAX_FAILED_CUTS:
                break
        raise CannotSplitError
