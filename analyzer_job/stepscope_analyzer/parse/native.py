"""The parser's native fast path (`_scan.c`): one chunk of events -> columns without a Python object per event.

`scan` returns None when the extension is not built (it is optional: a machine without a C compiler installs
without it) or when the chunk holds anything outside the shape it accepts; the chunk then goes through the Python
path (msgspec structs, or plain JSON objects), which owns every error message. For the chunks it accepts, its
columns equal the Python path's (tests/analyzer_job/parse/test_native.py compares both on real traces, generated
events and fuzzed text). `enabled(False)` turns it off (benchmarks and those tests compare the two).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

Scan = Callable[[memoryview | bytes | bytearray], dict[str, Any] | None]
ScanItems = Callable[[bytes, int, int], dict[str, Any] | None]


def _native() -> tuple[Scan, ScanItems] | tuple[None, None]:
    try:
        from stepscope_analyzer.parse._scan import scan, scan_items
    except ImportError:  # pragma: no cover - built wherever a C compiler was at install time
        return None, None
    return scan, scan_items


_scan, _scan_items = _native()

AVAILABLE = _scan is not None
SWITCH = "STEPSCOPE_NATIVE_PARSER"
"""environment variable: `0` turns the fast path off in this process and its workers (a kill switch)"""
_state = {"on": AVAILABLE and os.environ.get(SWITCH, "1") != "0"}


@dataclass(frozen=True)
class ScannedChunk:
    """One chunk's columns as `_scan.scan` returns them (see _scan.pyi)."""

    columns: dict[str, Any]

    @property
    def events(self) -> int:
        return int(self.columns["events"])


def active() -> bool:
    """Whether `scan` may take chunks here (built and switched on)."""
    return _scan is not None and _state["on"]


def scan(chunk: memoryview | bytes | bytearray) -> ScannedChunk | None:
    if _scan is None or not _state["on"]:
        return None
    columns = _scan(chunk)
    return None if columns is None else ScannedChunk(columns)


def scan_items(text: bytes, start: int, end: int) -> ScannedChunk | None:
    """The columns of the events in `text[start:end]`, an array's elements without its brackets, as `scan` reads
    them between "[" and "]" (the text is not copied: a chunk scanned on another thread is a slice of an immutable
    buffer); None as for `scan`."""
    if _scan_items is None or not _state["on"]:
        return None
    columns = _scan_items(text, start, end)
    return None if columns is None else ScannedChunk(columns)


@contextmanager
def enabled(on: bool) -> Iterator[None]:
    """Within the block, use the native path (when built) or not."""
    before = _state["on"]
    _state["on"] = on and AVAILABLE
    try:
        yield
    finally:
        _state["on"] = before
