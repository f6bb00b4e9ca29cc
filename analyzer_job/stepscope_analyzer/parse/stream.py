"""Decompressed bytes of a trace, block by block, so the whole JSON text never has to be in memory at once.

gzip is inflated on a background thread (zlib releases the GIL), overlapping with JSON decoding on the caller's
thread; the queue between them is bounded, which bounds memory.
"""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Generator, Iterator

from stepscope_analyzer.parse.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
BLOCK_BYTES = 1 << 20
_QUEUE_BLOCKS = 8


def _inflate(raw: bytes, block: int) -> Iterator[bytes]:
    """Inflate one or more concatenated gzip members; every piece yielded is at most ``block`` bytes."""
    data = memoryview(raw)
    step = 1 << 16
    while True:
        inflater = zlib.decompressobj(wbits=31)
        pos = 0
        while pos < len(data) and not inflater.eof:
            pending: bytes | memoryview = data[pos : pos + step]
            pos += step
            while pending and not inflater.eof:
                out = inflater.decompress(pending, block)
                pending = inflater.unconsumed_tail
                if out:
                    yield out
        tail = inflater.flush()
        if tail:
            yield tail
        if not inflater.eof:
            raise TraceError("corrupt or truncated gzip: the compressed stream ends early")
        # input consumed past the member's end comes back in unused_data; the rest was never fed
        rest = bytes(inflater.unused_data) + bytes(data[pos:])
        if not rest.strip(b"\x00"):
            return
        if rest[:2] != GZIP_MAGIC:
            raise TraceError("corrupt gzip: trailing garbage after the compressed stream")
        data = memoryview(rest)


def iter_blocks(raw: bytes, block: int = BLOCK_BYTES, threaded: bool = True) -> Generator[bytes, None, None]:
    """Yield the decompressed content of ``raw`` (gzip or plain) in blocks."""
    if raw[:2] != GZIP_MAGIC:
        for start in range(0, len(raw), block):
            yield raw[start : start + block]
        return
    if not threaded:
        try:
            yield from _inflate(raw, block)
        except zlib.error as exc:
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
        except zlib.error as exc:
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
