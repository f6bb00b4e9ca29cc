from typing import Any

def scan(chunk: memoryview | bytes | bytearray, /) -> dict[str, Any] | None:
    """Columns of a JSON array of trace events: events, rows (int); ts, dur (float64 bytes when ts_float /
    dur_float, else int64); name_id, cat_id (int32 bytes, into names / cats: str in order of first appearance);
    pid, tid, stream, correlation, external_id (int64 bytes); collectives: [(row, args object text)]; threads:
    [(pid, tid, thread name)]. None outside the fast path."""

def scan_items(text: memoryview | bytes | bytearray, start: int, end: int, /) -> dict[str, Any] | None:
    """scan's columns of the events in text[start:end]: an array's elements without its brackets (one or more events
    separated by commas), as scan reads them between "[" and "]"; None outside the fast path. The text is not
    copied."""
