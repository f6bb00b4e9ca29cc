"""parse_trace: a Kineto (torch.profiler) Chrome-trace file -> ParsedTrace (columns + metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stepscope_analyzer.parse.columns import ColumnBuilder, TraceColumns
from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.source import read_trace_bytes
from stepscope_analyzer.parse.splitter import DEFAULT_CHUNK_BYTES, CannotSplitError, ChunkedEvents, parse_whole


@dataclass
class ParsedTrace:
    events: TraceColumns
    metadata: dict[str, Any] = field(default_factory=dict)
    size_bytes: int = 0

    @property
    def distributed_info(self) -> dict[str, Any]:
        info = self.metadata.get("distributedInfo")
        return info if isinstance(info, dict) else {}

    @property
    def rank(self) -> int | None:
        rank = self.distributed_info.get("rank")
        return rank if isinstance(rank, int) and rank >= 0 else None

    @property
    def world_size(self) -> int | None:
        size = self.distributed_info.get("world_size")
        return size if isinstance(size, int) and size > 0 else None


def parse_bytes(data: bytes, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> ParsedTrace:
    """Parse decompressed Chrome-trace JSON bytes."""
    builder = ColumnBuilder()
    reader = ChunkedEvents(data, chunk_bytes)
    try:
        for chunk in reader:
            builder.add_chunk(chunk)
        metadata = reader.metadata
    except CannotSplitError:
        builder = ColumnBuilder()
        metadata, events = parse_whole(data)
        builder.add(events)
        del events
    except RecursionError as exc:
        raise TraceError("trace JSON is nested too deeply") from exc
    return ParsedTrace(events=builder.finish(), metadata=metadata, size_bytes=len(data))


def parse_trace(source: Path | bytes, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> ParsedTrace:
    """Parse a trace file (plain or gzip) or its bytes; raise TraceError for anything that cannot be analysed."""
    return parse_bytes(read_trace_bytes(source), chunk_bytes)
