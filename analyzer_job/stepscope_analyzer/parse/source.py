"""Reading a trace's bytes: a path or bytes, gzip-compressed or plain."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from stepscope_analyzer.parse.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"


def read_raw_bytes(source: Path | bytes) -> bytes:
    """The file's bytes as stored (possibly gzip-compressed)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read trace {source}: {exc.strerror or exc}") from exc


def read_trace_bytes(source: Path | bytes) -> bytes:
    """Return the decompressed JSON bytes of a trace file (``*.json`` or ``*.json.gz``) or of raw bytes."""
    raw = read_raw_bytes(source)
    origin = "<bytes>" if isinstance(source, (bytes, bytearray, memoryview)) else str(source)
    if raw[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(f"corrupt or truncated gzip in {origin}: {exc}") from exc
    return raw
