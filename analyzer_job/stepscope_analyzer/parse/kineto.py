"""parse_trace: a Kineto (torch.profiler) Chrome-trace file -> ParsedTrace (columns + metadata)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stepscope_analyzer import limits
from stepscope_analyzer.parse import native
from stepscope_analyzer.parse.columns import ColumnBuilder, TraceColumns
from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.source import read_raw_bytes, whole_text
from stepscope_analyzer.parse.splitter import (
    DEFAULT_CHUNK_BYTES,
    CannotSplitError,
    ChunkedEvents,
    InlineScanner,
    ScanRefusedError,
    parse_whole,
)
from stepscope_analyzer.parse.stream import iter_blocks
from stepscope_analyzer.workers.cpu_quota import cpus_per_trace


@dataclass
class ParsedTrace:
    events: TraceColumns
    metadata: dict[str, Any] = field(default_factory=dict)
    size_bytes: int = 0

    @property
    def distributed_info(self) -> dict[str, Any]:
        info = self.metadata.get("distributedInfo")
        return info if isinstance(info, dict) else {}

    def check_limits(self) -> None:
        """A claimed world size or rank beyond `max_world_size` makes the trace an error (it would size reports)."""
        table = limits.current()
        for key in ("world_size", "rank"):
            value = self.distributed_info.get(key)
            if isinstance(value, int) and (
                value > table.max_world_size or (key == "rank" and value >= table.max_world_size)
            ):
                raise table.exceeded("max_world_size", f"distributedInfo.{key} is {value}")

    @property
    def rank(self) -> int | None:
        rank = self.distributed_info.get("rank")
        return rank if isinstance(rank, int) and rank >= 0 else None

    @property
    def world_size(self) -> int | None:
        size = self.distributed_info.get("world_size")
        return size if isinstance(size, int) and size > 0 else None


def _parse_blocks(
    blocks: Iterator[bytes], whole: Callable[[], bytes], chunk_bytes: int, scanners: Executor | None = None
) -> ParsedTrace:
    builder = ColumnBuilder()
    reader = ChunkedEvents(blocks, chunk_bytes, scanners)
    try:
        for chunk in reader:
            builder.add_chunk(chunk)
        metadata, size = reader.metadata, reader.size_bytes
    except CannotSplitError:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()
        builder = ColumnBuilder()  # what the chunked pass built is dropped before the whole text is read
        data = whole()
        metadata, events = parse_whole(data)
        size = len(data)
        del data
        builder.add_chunk(events)
        del events
    except RecursionError as exc:
        raise TraceError("trace JSON is nested too deeply") from exc
    parsed = ParsedTrace(events=builder.finish(), metadata=metadata, size_bytes=size)
    parsed.check_limits()
    return parsed


def parse_bytes(data: bytes, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> ParsedTrace:
    """Parse decompressed Chrome-trace JSON bytes."""
    return _parse_blocks(iter_blocks(data), lambda: whole_text(data), chunk_bytes)


def parse_trace(
    source: Path | bytes,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    inflate_thread: bool | None = None,
    scan_threads: int | None = None,
) -> ParsedTrace:
    """Parse a trace file (plain or gzip) or its bytes; raise TraceError for anything that cannot be analysed.

    gzip input is inflated block by block, so the whole JSON text is never held in memory on the normal path: on a
    thread of its own while the events are decoded when `inflate_thread` (default: when this process may use a
    second CPU, cpu_quota), else between the chunks on the caller's thread. A caller that parses as many traces at
    once as there are CPUs says False: the thread would only contend for a CPU that another trace keeps busy (8
    ranks on 2 CPUs: 0.2-0.35 s more CPU of 2.9-3.4 s, handing the blocks over).
    With `scan_threads` > 1 (default: the CPUs this process may use when `inflate_thread`, else 1), the native
    scanner's chunks are scanned on that many threads while this one cuts the next (the scanner releases the GIL);
    with one, on this thread as they are cut (splitter.InlineScanner): either way the blocks are cut where they lie.
    Should the scanner refuse a chunk, the trace is parsed again on the general path, where refused chunks are cut
    again smaller or decoded by the Python path.
    """
    raw = read_raw_bytes(source)
    threaded = cpus_per_trace() > 1 if inflate_thread is None else inflate_thread
    threads = (cpus_per_trace() if threaded else 1) if scan_threads is None else scan_threads
    if threads > 1:
        with ThreadPoolExecutor(threads, thread_name_prefix="stepscope-scan") as scanners:
            try:
                return _parse_raw(raw, chunk_bytes, threaded, scanners)
            except ScanRefusedError:
                pass
    elif native.active():
        try:
            return _parse_raw(raw, chunk_bytes, threaded, InlineScanner())
        except ScanRefusedError:
            pass
    return _parse_raw(raw, chunk_bytes, threaded, None)


def _parse_raw(raw: bytes, chunk_bytes: int, threaded: bool, scanners: Executor | None) -> ParsedTrace:
    blocks = iter_blocks(raw, threaded=threaded)  # (plain JSON: cut into blocks, no thread)
    try:
        return _parse_blocks(blocks, lambda: whole_text(raw), chunk_bytes, scanners)
    finally:
        blocks.close()
