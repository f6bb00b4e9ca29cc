"""Decompressed bytes of a trace, block by block, so the whole JSON text never has to be in memory at once.

gzip is inflated with ISA-L (`isal`, several times the stdlib's zlib; the stdlib when isal is not
installed) on a background thread (both release the GIL), overlapping with JSON decoding on the caller's thread;
the queue between them is bounded, which bounds memory. Inflation stops with a LimitExceededError as soon as the
output passes the trace's cap (limits.Limits.inflate_cap: total size and inflate ratio), so a gzip bomb costs no
more memory than a few blocks.
"""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Generator, Iterator
from types import ModuleType

from stepscope_analyzer import limits
from stepscope_analyzer.parse.errors import TraceError


def _inflater_module() -> ModuleType:
    try:
        from isal import isal_zlib

        return isal_zlib
    except ImportError:  # pragma: no cover - the analyzer's dependencies include isal
        return zlib


def _gzip_streams() -> ModuleType | None:
    try:
        from isal import igzip_lib

        return igzip_lib
    except ImportError:  # pragma: no cover - the analyzer's dependencies include isal
        return None


INFLATER = _inflater_module()
"""zlib-compatible module used to inflate (isal_zlib, else zlib)."""
_GZIP_STREAMS = _gzip_streams()
INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, INFLATER.error)
GZIP_MAGIC = b"\x1f\x8b"
BLOCK_BYTES = 1 << 20
_QUEUE_BLOCKS = 8
_INPUT_STEP = 1 << 16
"""compressed bytes fed to zlib's decompressor at a time"""
_IGZIP_INPUT_STEP = 1 << 20
"""compressed bytes fed to ISA-L's at a time (it keeps what the output bound leaves unread: at most this much)"""


def _inflate(raw: bytes, block: int, cap: int | None = None) -> Iterator[bytes]:
    """Inflate one or more concatenated gzip members; every piece yielded is at most ``block`` bytes.

    More than ``cap`` inflated bytes (default: the limits' cap for this size) raise LimitExceededError."""
    table = limits.current()
    allowed, limit_name = table.inflate_cap(len(raw))
    if cap is not None and cap < allowed:
        allowed, limit_name = cap, "max_whole_parse_bytes"
    total = 0
    for out in _members(raw, block):
        total += len(out)
        if total > allowed:
            raise table.exceeded(limit_name, f"the gzip trace ({len(raw)} bytes) inflates past {allowed} bytes")
        yield out


def _members(raw: bytes, block: int) -> Iterator[bytes]:
    if _GZIP_STREAMS is not None:
        return _igzip_members(raw, block, _GZIP_STREAMS)
    return _zlib_members(raw, block)


def _igzip_members(raw: bytes, block: int, igzip: ModuleType) -> Iterator[bytes]:
    """ISA-L's streaming decompressor, asked for at most `block` bytes at a time: each output is allocated at its
    size once, where `decompressobj().decompress` grows its output by reallocation (the 54 MB shared trace inflates
    in 25 ms this way, 35 ms that way, 53 ms in one call)."""
    data = memoryview(raw)
    while True:
        inflater = igzip.IgzipDecompressor(flag=igzip.DECOMP_GZIP)
        pos = 0
        while not inflater.eof:
            if inflater.needs_input:
                if pos >= len(data):
                    raise TraceError("corrupt or truncated gzip: the compressed stream ends early")
                out = inflater.decompress(data[pos : pos + _IGZIP_INPUT_STEP], block)
                pos += _IGZIP_INPUT_STEP
            else:
                out = inflater.decompress(b"", block)
            if out:
                yield out
        rest = bytes(inflater.unused_data) + bytes(data[pos:])
        if not _next_member(rest):
            return
        data = memoryview(rest)


def _zlib_members(raw: bytes, block: int) -> Iterator[bytes]:
    data = memoryview(raw)
    while True:
        inflater = INFLATER.decompressobj(wbits=31)
        pos = 0
        while pos < len(data) and not inflater.eof:
            pending: bytes | memoryview = data[pos : pos + _INPUT_STEP]
            pos += _INPUT_STEP
            while pending and not inflater.eof:
                out = inflater.decompress(pending, block)
                pending = inflater.unconsumed_tail
                if out:
                    yield out
        if not inflater.eof:  # (flush() after the end would append the unconsumed tail to unused_data again)
            tail = inflater.flush()
            if tail:
                yield tail
            raise TraceError("corrupt or truncated gzip: the compressed stream ends early")
        # input consumed past the member's end comes back in unused_data; the rest was never fed
        rest = bytes(inflater.unused_data) + bytes(data[pos:])
        if not _next_member(rest):
            return
        data = memoryview(rest)


def _next_member(rest: bytes) -> bool:
    """Whether the bytes after a gzip member start another one (False: only zero padding or nothing is left)."""
    if not rest.strip(b"\x00"):
        return False
    if rest[:2] != GZIP_MAGIC:
        raise TraceError("corrupt gzip: trailing garbage after the compressed stream")
    return True


class InflateError(ValueError):
    """Bytes that cannot be inflated within a bound, or corrupt gzip; the message says which."""


def inflate_bounded(raw: bytes, limit: int) -> tuple[bytes, bool]:
    """Small side files (GPU samples, Flight Recorder dumps): the bytes as they are when not gzip, else gzip
    inflated in one call, and whether the gzip stream was complete. More than `limit` bytes, or a corrupt stream,
    raise InflateError ("is larger than ...", "inflates to more than ...", "is corrupt gzip: ..."), to
    follow the file's name."""
    if raw[:2] != GZIP_MAGIC:
        if len(raw) > limit:
            raise InflateError(f"is larger than {limit:,} bytes")
        return raw, True
    inflater = INFLATER.decompressobj(wbits=31)
    try:
        data = inflater.decompress(raw, limit + 1)
    except INFLATE_ERRORS as exc:
        raise InflateError(f"is corrupt gzip: {exc}") from exc
    if len(data) > limit or inflater.unconsumed_tail:
        raise InflateError(f"inflates to more than {limit:,} bytes")
    return data, bool(inflater.eof)


def iter_blocks(
    raw: bytes, block: int = BLOCK_BYTES, threaded: bool = True, cap: int | None = None
) -> Generator[bytes, None, None]:
    """Yield the decompressed content of ``raw`` (gzip or plain) in blocks (at most ``cap`` bytes of it, if given)."""
    if raw[:2] != GZIP_MAGIC:
        table = limits.current()
        if len(raw) > table.max_inflated_bytes:
            raise table.exceeded("max_inflated_bytes", f"the trace holds {len(raw)} bytes of JSON")
        for start in range(0, len(raw), block):
            yield raw[start : start + block]
        return
    if not threaded:
        try:
            yield from _inflate(raw, block, cap)
        except INFLATE_ERRORS as exc:
            raise TraceError(f"corrupt or truncated gzip: {exc}") from exc
        return
    blocks: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=_QUEUE_BLOCKS)
    stop = threading.Event()

    def produce() -> None:
        try:
            for out in _inflate(raw, block):
                while not stop.is_set():
                    try:
                        blocks.put(out, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            blocks.put(None)
        except INFLATE_ERRORS as exc:
            blocks.put(TraceError(f"corrupt or truncated gzip: {exc}"))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            blocks.put(exc)

    worker = threading.Thread(target=produce, name="stepscope-inflate", daemon=True)
    worker.start()
    try:
        while True:
            item = blocks.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            try:
                blocks.get_nowait()
            except queue.Empty:
                worker.join(timeout=0.05)
