"""Splitting a Chrome-trace document into chunks of events without building the whole object tree.

The decompressed text arrives in blocks. The ``traceEvents`` array is cut at event boundaries (``}`` ``,`` ``{``)
about every ``chunk_bytes`` and each piece is decoded on its own, so at most a few chunks of text and one chunk of
decoded events are alive at a time. A cut is accepted only when the piece decodes as a complete JSON array, which
proves the cut is at the array's top level (a cut inside a string or a nested object leaves the piece unbalanced).
Anything unusual raises CannotSplitError and the caller parses the whole document at once, which also yields the
precise JSON error for invalid input. The text held at once is bounded (limits: `max_prefix_bytes` before the array,
`max_event_bytes` for one event or the space between two), so whitespace or one giant event cannot grow the buffer
to the size of the input.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

import msgspec
import orjson

from stepscope_analyzer import limits
from stepscope_analyzer.parse import native
from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.native import ScannedChunk
from stepscope_analyzer.parse.schema import EVENTS_DECODER

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_CHUNK_BYTES = 256 << 10
"""text decoded per chunk by the Python path: its event objects are the parse's transient peak (256 KiB: ~70 MB for
the 54 MB trace, whole analysis; 2 MiB: ~80 MB)"""
NATIVE_SCALE = 4
"""while the native scanner takes the chunks, they are this many times larger: the scanner keeps no object per event,
so its chunk costs only its text, and each chunk has a fixed cost (its names decoded and mapped, its columns moved:
~50 us); on the 54 MB trace 1 MiB chunks parse ~5% faster, at the same peak. A chunk the scanner refuses is cut again
at the Python path's size, so that path never holds more than DEFAULT_CHUNK_BYTES of events."""
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]")
_MAX_FAILED_CUTS = 32
_COMPACT_BYTES = 4 << 20
"""text already decoded that the buffer may keep before it is dropped (one copy of what follows, every few chunks)"""


class CannotSplitError(Exception):
    """The document cannot be cut safely; parse it whole instead."""


class ScanRefusedError(Exception):
    """A chunk scanned ahead on another thread was refused by the native scanner (not its shape, or the cut was not
    at the array's top level); parse the trace again without scanning ahead."""


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


def _decode_array(view: memoryview, native_only: bool = False) -> list[Any] | ScannedChunk | None:
    """Decode a JSON array: the native scanner's columns when built and the chunk fits it, else (unless
    `native_only`) typed structs when every event fits the schema, else plain dicts; None if not JSON."""
    scanned = native.scan(view)
    if scanned is not None or native_only:
        return scanned
    try:
        events: list[Any] = EVENTS_DECODER.decode(view)
        return events
    except (msgspec.DecodeError, ValueError):  # ValueError: UnicodeDecodeError on non-UTF-8 bytes
        pass  # not this schema, or not JSON: the generic path decides (and handles non-UTF-8 names)
    try:
        value = _loads(bytes(view))
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def _decode_span(buf: bytearray, start: int, end: int, native_only: bool = False) -> list[Any] | ScannedChunk | None:
    """Decode ``buf[start:end]`` without copying it (the views are released before the buffer is resized)."""
    with memoryview(buf) as whole, whole[start:end] as view:
        return _decode_array(view, native_only)


SCAN_AHEAD_CHUNKS = 4
"""chunks handed to the scanner threads before the oldest one's result is waited for"""
_LOOKAHEAD = 1 << 16
"""text read past a chunk's size before the general path cuts it (at the first event boundary past the size)"""
_JSON_SPACE = frozenset(b" \t\r\n")


def _block_cuts(text: bytes, at: int, big: int) -> Iterator[int]:
    """Where to cut `text` after its "," at `at`: the "," of the first event boundary past every `big` bytes, then
    that of the last boundary in the text, each past the one before; nothing when no boundary follows `at`."""
    while (cut := _BOUNDARY.search(text, at + big)) is not None:
        at = text.index(b",", cut.start())
        yield at
    last = _last_cut(text, at + 1)
    if last > at:
        yield last


def _last_cut(text: bytes, lo: int) -> int:
    """The position of the "," of the last event boundary ("}", ",", "{" with JSON whitespace between) whose "}"
    is at or after `lo`; -1 when there is none. Like the regex cuts, it may fall inside a string: the scanner
    refuses such a chunk."""
    pos = len(text)
    while True:
        brace = text.rfind(b"{", lo, pos)
        if brace < 0:
            return -1
        i = brace - 1
        while i >= lo and text[i] in _JSON_SPACE:
            i -= 1
        if i >= lo and text[i] == 0x2C:
            comma = i
            i -= 1
            while i >= lo and text[i] in _JSON_SPACE:
                i -= 1
            if i >= lo and text[i] == 0x7D:
                return comma
        pos = brace


def _no_boundary(held: int) -> limits.LimitExceededError:
    return limits.current().exceeded("max_event_bytes", f"no event boundary within {held} bytes of text")


def _scanned(future: Future[ScannedChunk | None]) -> ScannedChunk:
    chunk = future.result()
    if chunk is None:
        raise ScanRefusedError
    return chunk


class InlineScanner(Executor):
    """Runs each call it is handed at once, on the caller's thread: ChunkedEvents' in-place cutting of the blocks
    (no text copied but the events across two blocks) where no CPU is left for scanner threads."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the caller sees it where it reads the result, as from a thread
            future.set_exception(exc)
        return future


class ChunkedEvents:
    """Iterate the ``traceEvents`` array chunk by chunk; ``metadata`` is set once iteration has finished.

    The chunk being cut always starts with ``[``: a chunk is decoded in place by turning the ``,`` after its last
    event into ``]``, then that byte becomes the ``[`` of the next chunk, so no chunk text is copied.
    Raises CannotSplitError (possibly after some chunks were yielded) when the document must be parsed whole.
    """

    def __init__(
        self, blocks: Iterable[bytes], chunk_bytes: int = DEFAULT_CHUNK_BYTES, scanners: Executor | None = None
    ) -> None:
        self._blocks = iter(blocks)
        self._chunk_bytes = chunk_bytes
        self._scanners = scanners
        self._buf = bytearray()
        self._eof = False
        self.metadata: dict[str, Any] = {}
        self.size_bytes = 0

    def _next_block(self) -> bytes | None:
        """The next block of text (counted in `size_bytes`), or None once the input has ended."""
        block = None if self._eof else next(self._blocks, None)
        if block is None:
            self._eof = True
            return None
        self.size_bytes += len(block)
        return block

    def _fill(self, size: int) -> None:
        """Read blocks until the buffer holds ``size`` bytes (from its start) or the input ends."""
        while len(self._buf) < size and (block := self._next_block()) is not None:
            self._buf += block

    def __iter__(self) -> Iterator[list[Any] | ScannedChunk]:
        # Phase 1: the text before the events array (kept for the metadata).
        key = _EVENTS_KEY.search(self._buf)
        max_prefix = limits.current().max_prefix_bytes
        while key is None:
            searched = len(self._buf)
            if searched > max_prefix or self._eof:
                if not self._buf.strip():
                    raise TraceError("trace is empty")
                raise CannotSplitError
            self._fill(searched + 1)
            key = _EVENTS_KEY.search(self._buf, max(0, searched - 64))
        if self._buf.lstrip()[:1] != b"{":
            raise CannotSplitError
        prefix = bytes(self._buf[: key.end()])
        del self._buf[: key.end() - 1]  # keep the "["
        tail = yield from self._events()
        try:
            metadata = _loads(prefix + tail)
        except orjson.JSONDecodeError as exc:
            raise CannotSplitError from exc
        if not isinstance(metadata, dict) or metadata.get("traceEvents") != []:
            raise CannotSplitError
        del metadata["traceEvents"]
        self.metadata = metadata

    def _hold(self, at: int, want: int, most: int) -> tuple[int, int]:
        """Drop the decoded text before `at` once it is over _COMPACT_BYTES, then read until the buffer holds
        `want` bytes from `at` (and a little more) or the input ends; (where the chunk now starts, the bytes held
        from there). More than `most` bytes without a cut is the `max_event_bytes` limit."""
        buf = self._buf
        if at > _COMPACT_BYTES:
            del buf[:at]
            at = 0
        self._fill(at + want + _LOOKAHEAD)
        held = len(buf) - at
        if held > most:
            raise _no_boundary(held)
        return at, held

    def _scan_ahead(self, scanners: Executor) -> Generator[ScannedChunk, None, None]:
        """The native scanner's chunks, scanned on `scanners`' threads while this one cuts the next ones, yielded in
        order, at most SCAN_AHEAD_CHUNKS in flight. The scanner reads each block where it lies (the first one: the
        text read so far, from the array's "["): a block's events from its first event boundary to its last are cut
        in place (at a boundary past every `big` bytes), and only the event across two blocks is copied (what the
        last block left, from its ",", joined with the next block's text up to its first boundary), which makes a
        chunk of its own. A block is cut once the next one is read: the last block and what the one before it left
        go back into the buffer, from that ",", for the rest of the parse (the array's end and the text after it). A
        chunk the scanner refuses raises ScanRefusedError: a cut cannot be taken back once later ones are made."""
        big = self._chunk_bytes * NATIVE_SCALE
        most = big + limits.current().max_event_bytes
        left = b""  # what the block before left after its last cut, from that ","
        block: bytes | None = bytes(self._buf)  # the text read so far, from the array's "["
        pending: deque[Future[ScannedChunk | None]] = deque()
        try:
            while block is not None:
                following = self._next_block()
                if following is None:
                    break
                first = _BOUNDARY.search(block)
                if first is None:  # no boundary in the whole block: one event longer than it, read on
                    left += block
                    if len(left) > most:
                        raise _no_boundary(len(left))
                    block = following
                    continue
                at = block.index(b",", first.start())
                across = left + block[: at + 1]
                pending.append(scanners.submit(native.scan_items, across, 1, len(across) - 1))
                for comma in _block_cuts(block, at, big):
                    pending.append(scanners.submit(native.scan_items, block, at + 1, comma))
                    at = comma
                left, block = block[at:], following
                while len(pending) > SCAN_AHEAD_CHUNKS:
                    yield _scanned(pending.popleft())
            while pending:
                yield _scanned(pending.popleft())
        finally:
            for future in pending:
                future.cancel()
        self._buf = bytearray().join([left] if block is None else [left, block])

    def _events(self) -> Generator[list[Any] | ScannedChunk, None, bytes]:
        """Yield event chunks; return the text from the array's closing ``]`` to the end of the document.

        The chunk being cut starts at ``at`` in the buffer; the text before it is dropped only once it is over
        ``_COMPACT_BYTES`` (deleting the front of a bytearray copies what follows into a fresh allocation once the
        rest is under half of it, which for every chunk was a second copy of most of the text)."""
        if self._scanners is not None and native.active():
            yield from self._scan_ahead(self._scanners)
            self._buf[0] = 0x5B  # the rest as an array of its own: "[" for the "," after the last chunk scanned
        buf = self._buf
        at = 0
        failed = 0
        small = self._chunk_bytes
        big = small * NATIVE_SCALE if native.active() else small
        size = want = big  # the chunk size now: big while the native scanner takes the chunks
        most = big + limits.current().max_event_bytes
        while True:
            at, held = self._hold(at, want, most)
            if held < want:
                if size > small and held > small:
                    size = want = small  # the last piece is for every path: cut the rest at the Python path's size
                    continue
                break  # the end of input is near: the last piece holds the array's end
            cut = _BOUNDARY.search(buf, at + want)
            if cut is None:
                if self._eof:
                    break
                want = held  # one event longer than a chunk: read on
                continue
            comma = buf.index(b",", cut.start())
            buf[comma] = 0x5D  # "]"
            events = _decode_span(buf, at, comma + 1, native_only=size > small)
            if events is None and size > small:
                buf[comma] = 0x2C  # "," (not the scanner's shape, or no top-level cut): cut again, smaller
                size = want = small
                continue
            if events is None:
                buf[comma] = 0x2C  # ","
                failed += 1
                if failed > _MAX_FAILED_CUTS:
                    raise CannotSplitError
                want = cut.end() - at
                continue
            yield events
            buf[comma] = 0x5B  # "[" of the next chunk
            at = comma
            size = want = big if isinstance(events, ScannedChunk) else small
        del buf[:at]
        self._fill(1 << 62)
        if buf[1:].lstrip()[:1] == b"]":
            return bytes(buf[buf.index(b"]") :])
        for end in _ARRAY_END.finditer(buf):
            events = _decode_span(buf, 0, end.end())
            if events is not None:
                yield events
                return bytes(buf[end.end() - 1 :])
            failed += 1
            if failed > _MAX_FAILED_CUTS:
                break
        raise CannotSplitError
