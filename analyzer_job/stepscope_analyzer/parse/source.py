"""Reading a trace's bytes: a path or bytes, gzip-compressed or plain, always within the analyzer's limits.

The whole decompressed text is only ever built for the fallback (whole-document) parse, inflated block by block
and refused past `max_whole_parse_bytes` (and the inflate limits) before it grows further; text that does not start
like JSON is refused at its first bytes."""

from __future__ import annotations

from pathlib import Path

from stepscope_analyzer import limits
from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.stream import GZIP_MAGIC, iter_blocks

_JSON_START = frozenset(b'{["-0123456789tfn')  # bytes a JSON value can start with
_WHITESPACE = b" \t\r\n"


def read_raw_bytes(source: Path | bytes) -> bytes:
    """The file's bytes as stored (possibly gzip-compressed), at most `max_trace_file_bytes`."""
    table = limits.current()
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        try:
            size = Path(source).stat().st_size
            if size > table.max_trace_file_bytes:
                raise table.exceeded("max_trace_file_bytes", f"trace {source} holds {size} bytes")
            data = Path(source).read_bytes()
        except OSError as exc:
            raise TraceError(f"cannot read trace {source}: {exc.strerror or exc}") from exc
    if len(data) > table.max_trace_file_bytes:
        raise table.exceeded("max_trace_file_bytes", f"the trace holds {len(data)} bytes")
    return data


def _check_json_start(first: bytes | bytearray) -> None:
    stripped = bytes(first).lstrip(_WHITESPACE)
    if stripped and stripped[0] not in _JSON_START:
        raise TraceError(f"not a JSON trace: it starts with {stripped[:16]!r}")


def read_trace_bytes(source: Path | bytes) -> bytes:
    """The decompressed JSON bytes of a trace file (``*.json`` or ``*.json.gz``) or of raw bytes, for a whole-document
    parse: at most `max_whole_parse_bytes` (LimitExceededError beyond), refused early when not JSON."""
    return whole_text(read_raw_bytes(source))


def whole_text(raw: bytes) -> bytes:
    """`raw` (gzip or plain, as stored) as the whole JSON text, within the whole-parse limits (see read_trace_bytes)."""
    table = limits.current()
    if raw[:2] != GZIP_MAGIC:
        _check_json_start(raw[:4096])
        if len(raw) > table.max_whole_parse_bytes:
            raise table.exceeded("max_whole_parse_bytes", f"the trace cannot be read in chunks and holds {len(raw)}")
        return raw
    out = bytearray()
    for block in iter_blocks(raw, threaded=False, cap=table.max_whole_parse_bytes):
        if len(out) < 4096:
            _check_json_start(out + block[:4096])
        out += block
    return bytes(out)
