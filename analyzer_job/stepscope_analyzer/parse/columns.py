"""Columnar storage of a trace's complete events: numpy arrays plus interned name and category tables.

The builder enforces the analyzer's limits on what it accumulates (events, distinct names and their characters,
steps, durations): beyond one, the trace is a LimitExceededError naming it; names longer than `max_name_chars` are
cut (with a hash, so distinct names stay distinct)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from stepscope_analyzer import limits
from stepscope_analyzer.parse.errors import TraceError
from stepscope_analyzer.parse.native import ScannedChunk
from stepscope_analyzer.parse.schema import (
    ARGS_DECODER,
    COLLECTIVE_FIELDS,
    MEMORY_ARGS_DECODER,
    META_TYPE,
    RAW_LIST_DECODER,
    TraceEvent,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

INT64_MAX = (1 << 63) - 1
# Keys of an event's args kept for collectives (record_param_comms and the like).
COLLECTIVE_ARGS = (
    "Collective name",
    "Process Group Name",
    "Process Group Description",
    "Process Group ID",
    "Process Group Ranks",
    "Group size",
    "In msg nelems",
    "Out msg nelems",
    "dtype",
    "Src Rank",
    "Dst Rank",
)


MEMORY_EVENT = "[memory]"
ALLOCATED, RESERVED, DEVICE_TYPE = "Total Allocated", "Total Reserved", "Device Type"
FLOWS = ("s", "t", "f")
"""flow events' phases: they carry nothing kept (the typed path decodes no field of theirs)"""
MAX_MEMORY_EVENTS = 1_000_000
"""allocator events kept per trace (each a few numbers): the memory chart needs far fewer"""
MEMORY_ROW = np.dtype([("ts", "<f8"), ("allocated", "<f8"), ("reserved", "<f8"), ("device", "<i8")])
"""a `[memory]` event as the native scanner reads it"""


def _is_number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


@dataclass
class TraceColumns:
    """Complete ('X'-like: non-null ``dur`` and ``cat``) events, one row each, in file order.

    Times are microseconds. When the trace has float (ns-resolution) timestamps they are rounded the way HTA does
    (``ts = ceil(ts)``, ``end = floor(ts + dur)``, ``dur = end - ts``) so numbers match HTA exactly.
    """

    names: list[str]
    cats: list[str]
    name_id: I32
    cat_id: I32
    ts: F64
    dur: F64
    pid: I64
    tid: I64
    stream: I64
    correlation: I64
    external_id: I64
    rounded_ns: bool = False
    collective_args: dict[int, dict[str, Any]] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    labels: dict[int, str] = field(default_factory=dict)  # negative pid/tid codes for non-integer pids/tids
    memory: F64 = field(default_factory=lambda: np.empty((0, 4), dtype=np.float64))
    """the allocator's `[memory]` instant events (profile_memory), one row each: ts, total allocated, total reserved,
    device type (0 CPU, 1 CUDA); in file order, at most MAX_MEMORY_EVENTS"""
    _matching: dict[re.Pattern[str], list[int]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def end(self) -> F64:
        return self.ts + self.dur

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def cat_code(self, cat: str) -> int:
        try:
            return self.cats.index(cat)
        except ValueError:
            return -1

    def cat_mask(self, *cats: str) -> npt.NDArray[np.bool_]:
        return id_mask(self.cat_id, [self.cat_code(c) for c in cats], len(self.cats))

    def names_matching(self, pattern: re.Pattern[str]) -> list[int]:
        """Ids of the names `pattern` finds something in (searched once per pattern: the analyses ask again)."""
        ids = self._matching.get(pattern)
        if ids is None:
            ids = self._matching[pattern] = [i for i, n in enumerate(self.names) if pattern.search(n)]
        return ids

    def name_mask(self, ids: Sequence[int]) -> npt.NDArray[np.bool_]:
        """Rows whose name id is one of `ids`."""
        return id_mask(self.name_id, ids, len(self.names))


FEW_IDS = 6
"""up to this many ids, a mask is one comparison per id (~10 us per 100k rows each); more, one lookup per row
(np.take of a table by id: ~130 us; fancy indexing ~350 us, np.isin ~1.4 ms)"""


def id_mask(column: I32, ids: Sequence[int], count: int) -> npt.NDArray[np.bool_]:
    """Rows of an id column (ids in [0, count)) holding one of `ids` (those outside the range match nothing)."""
    wanted = sorted({i for i in ids if 0 <= i < count})
    if not wanted:
        return np.zeros(column.shape, dtype=bool)
    if len(wanted) <= FEW_IDS:
        mask: npt.NDArray[np.bool_] = column == wanted[0]
        for i in wanted[1:]:
            mask |= column == i
        return mask
    table = np.zeros(count, dtype=bool)
    table[wanted] = True
    found: npt.NDArray[np.bool_] = np.take(table, column)
    return found


def _as_int(value: Any, default: int, labels: dict[str, int]) -> int:
    if type(value) is int:
        return value
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    key = str(value)
    code = labels.get(key)
    if code is None:
        code = labels[key] = -2 - len(labels)
    return code


def _stream_of(value: Any) -> int:
    # HTA: int(stream) when it converts, else -1.
    if type(value) is int:
        return value
    if value is None:
        return -1
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1


def clip_name(name: str, most: int) -> str:
    """`name` cut to `most` characters, ending with a hash of the whole so that distinct names stay distinct."""
    if len(name) <= most:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{name[: max(0, most - 14)]}…#{digest}"


def _int_arg(value: Any) -> int:
    if type(value) is int:
        return value
    if value is None:
        return -1
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return -1


def _collective_args(args: Any) -> dict[str, Any] | None:
    """The collective's args kept (those not null) of an event's decoded EventArgs; None when it is no collective
    (neither a collective nor a process group name)."""
    if args.collective_name is None and args.pg_name is None:
        return None
    return {key: getattr(args, attr) for attr, key in COLLECTIVE_FIELDS if getattr(args, attr) is not None}


def _ids(values: list[Any], table: dict[str, int], new: Callable[[str], int]) -> list[Any]:
    """The id of each value (its text: str() of anything else), numbering unseen ones with `new` in order."""
    try:
        ids: list[Any] = list(map(table.get, values))  # one C-level pass while nothing is new
    except TypeError:  # an unhashable value (a JSON array as a name)
        ids = [None] * len(values)
    if None in ids:
        for i, value in enumerate(values):
            if ids[i] is None:
                key = value if type(value) is str else str(value)
                known = table.get(key)
                ids[i] = new(key) if known is None else known
    return ids


class ColumnBuilder:
    """Accumulates events chunk by chunk; ``finish`` turns them into TraceColumns."""

    def __init__(self) -> None:
        self._names: dict[str, int] = {}
        self._cats: dict[str, int] = {}
        self._name_id: list[Any] = []  # ids (a row's name until _intern_rows)
        self._cat_id: list[Any] = []
        self._ts: list[Any] = []
        self._dur: list[Any] = []
        self._pid: list[int] = []
        self._tid: list[int] = []
        self._stream: list[int] = []
        self._corr: list[int] = []
        self._ext: list[int] = []
        self._labels: dict[str, int] = {}
        self._collective_args: dict[int, dict[str, Any]] = {}
        self._thread_names: dict[tuple[int, int], str] = {}
        self._memory = _MemoryRows()
        self.seen = 0
        self._rows = 0  # rows already flushed into arrays
        self._limits = limits.current()
        self._name_chars = 0
        self._parts: dict[str, list[npt.NDArray[Any]]] = {k: [] for k in _PART_KEYS}

    def add(self, events: list[Any]) -> None:
        """Events decoded as plain JSON objects (the generic path: any shape, checked field by field)."""
        labels, first = self._labels, len(self._ts)
        name_id, cat_id, ts_l, dur_l = self._name_id, self._cat_id, self._ts, self._dur
        pid_l, tid_l, stream_l, corr_l, ext_l = self._pid, self._tid, self._stream, self._corr, self._ext
        coll = self._collective_args
        self.seen += len(events)
        for ev in events:
            if type(ev) is not dict:
                raise TraceError(f"trace event is a JSON {type(ev).__name__}, expected an object")
            dur = ev.get("dur")
            cat = ev.get("cat")
            if dur is None or cat is None:
                if ev.get("ph") == "M" and ev.get("name") == "thread_name":
                    self._thread_name(ev)
                elif ev.get("name") == MEMORY_EVENT and type(ev.get("args")) is dict and ev.get("ph") not in FLOWS:
                    a = ev["args"]
                    self._memory_event(ev.get("ts"), a.get(ALLOCATED), a.get(RESERVED), a.get(DEVICE_TYPE))
                continue
            if cat == "Trace":
                continue
            name_id.append(ev.get("name", ""))  # the name itself until _intern_rows
            cat_id.append(cat)
            ts_l.append(ev.get("ts"))
            dur_l.append(dur)
            pid = ev.get("pid")
            pid_l.append(pid if type(pid) is int else _as_int(pid, -1, labels))
            tid = ev.get("tid")
            tid_l.append(tid if type(tid) is int else _as_int(tid, -1, labels))
            args = ev.get("args")
            if args and type(args) is dict:
                stream = args.get("stream")
                stream_l.append(-1 if stream is None else _stream_of(stream))
                corr = args.get("correlation")
                corr_l.append(-1 if corr is None else _int_arg(corr))
                ext = args.get("External id")
                ext_l.append(-1 if ext is None else _int_arg(ext))
                if args.get("Collective name") is not None or args.get("Process Group Name") is not None:
                    coll[self._rows + len(ts_l) - 1] = {k: args[k] for k in COLLECTIVE_ARGS if args.get(k) is not None}
            else:
                stream_l.append(-1)
                corr_l.append(-1)
                ext_l.append(-1)
        self._intern_rows(first)

    def add_typed(self, events: list[Any]) -> None:
        """Same as ``add`` for events decoded into TraceEvent structs (the fast path)."""
        labels, first = self._labels, len(self._ts)
        name_id, cat_id, ts_l, dur_l = self._name_id, self._cat_id, self._ts, self._dur
        pid_l, tid_l, stream_l, corr_l, ext_l = self._pid, self._tid, self._stream, self._corr, self._ext
        self.seen += len(events)
        for ev in events:
            dur = ev.dur
            cat = ev.cat
            if dur is None or cat is None:
                if type(ev) is META_TYPE and ev.name == "thread_name" and ev.args is not None:
                    self._thread_name({"pid": ev.pid, "tid": ev.tid, "args": {"name": ev.args.name}})
                elif ev.name == MEMORY_EVENT and ev.args is not None:
                    a = ev.args
                    self._memory_event(ev.ts, a.total_allocated, a.total_reserved, a.device_type)
                continue
            if cat == "Trace":
                continue
            name_id.append(ev.name)  # the name itself until _intern_rows
            cat_id.append(cat)
            ts_l.append(ev.ts)
            dur_l.append(dur)
            pid = ev.pid
            pid_l.append(pid if type(pid) is int else _as_int(pid, -1, labels))
            tid = ev.tid
            tid_l.append(tid if type(tid) is int else _as_int(tid, -1, labels))
            args = ev.args
            if args is None:
                stream_l.append(-1)
                corr_l.append(-1)
                ext_l.append(-1)
                continue
            stream = args.stream
            stream_l.append(stream if type(stream) is int else _stream_of(stream))
            corr = args.correlation
            corr_l.append(corr if type(corr) is int else _int_arg(corr))
            ext = args.external_id
            ext_l.append(ext if type(ext) is int else _int_arg(ext))
            coll = _collective_args(args)
            if coll is not None:
                self._collective_args[self._rows + len(ts_l) - 1] = coll
        self._intern_rows(first)

    def _memory_event(self, ts: Any, allocated: Any, reserved: Any, device: Any) -> None:
        """One `[memory]` event, kept when its numbers are numbers (at most MAX_MEMORY_EVENTS)."""
        values = (ts, allocated, reserved)
        if len(self._memory) >= MAX_MEMORY_EVENTS or not all(_is_number(v) for v in values):
            return
        self._memory.one(float(ts), float(allocated), float(reserved), device if type(device) is int else 0)

    def _memory_rows(self, rows: bytes) -> None:
        """A scanned chunk's `[memory]` events the scanner read itself ((ts, allocated, reserved, device) records; NaN
        where allocated or reserved was null or absent): the same rows as `_memory_chunk` decodes from their text."""
        if not rows or len(self._memory) >= MAX_MEMORY_EVENTS:
            return
        table = np.frombuffer(rows, dtype=MEMORY_ROW)
        ts, allocated, reserved = table["ts"], table["allocated"], table["reserved"]
        keep = np.flatnonzero(np.isfinite(ts) & np.isfinite(allocated) & np.isfinite(reserved))
        keep = keep[: MAX_MEMORY_EVENTS - len(self._memory)]
        self._memory.rows(ts[keep], allocated[keep], reserved[keep], table["device"][keep])

    def _memory_chunk(self, times: bytes, texts: bytes) -> None:
        """A scanned chunk's `[memory]` events at once (their times, float64; their args texts as one JSON array): the
        same rows as `_memory_event` one by one, which takes over when a value is not of a number's type."""
        if not texts or len(self._memory) >= MAX_MEMORY_EVENTS:
            return
        ts = np.frombuffer(times, dtype=np.float64)
        try:
            args = MEMORY_ARGS_DECODER.decode(texts)
        except msgspec.MsgspecError:
            for at, text in zip(ts.tolist(), RAW_LIST_DECODER.decode(texts), strict=True):
                a = ARGS_DECODER.decode(text)
                self._memory_event(at, a.total_allocated, a.total_reserved, a.device_type)
            return
        allocated = np.array([a.total_allocated for a in args], dtype=np.float64)  # None: NaN, left out below
        reserved = np.array([a.total_reserved for a in args], dtype=np.float64)
        device = np.array([a.device_type if type(a.device_type) is int else 0 for a in args], dtype=np.float64)
        keep = np.flatnonzero(np.isfinite(ts) & np.isfinite(allocated) & np.isfinite(reserved))
        keep = keep[: MAX_MEMORY_EVENTS - len(self._memory)]
        self._memory.rows(ts[keep], allocated[keep], reserved[keep], device[keep])

    def _intern_rows(self, first: int) -> None:
        """Turn the names and categories of the rows from `first` on into ids (in order of first appearance; both
        paths share this, so an event's ids do not depend on how it was decoded)."""
        name_id, cat_id = self._name_id, self._cat_id
        name_id[first:] = _ids(name_id[first:], self._names, self._intern)
        cat_id[first:] = _ids(cat_id[first:], self._cats, self._new_category)

    def _new_category(self, cat: str) -> int:
        cid = self._cats[cat] = len(self._cats)
        return cid

    def _intern(self, name: str) -> int:
        """A new name's id, within the limits on distinct names and their characters."""
        names, table = self._names, self._limits
        if len(names) >= table.max_distinct_names:
            raise table.exceeded("max_distinct_names", f"the trace has more than {len(names)} distinct event names")
        self._name_chars += len(name)
        if self._name_chars > table.max_name_chars_total:
            raise table.exceeded("max_name_chars_total", f"its distinct event names exceed {self._name_chars} chars")
        nid = names[name] = len(names)
        return nid

    def add_scanned(self, chunk: ScannedChunk) -> None:
        """Same as ``add_typed`` for a chunk the native scanner turned into columns (parse.native)."""
        c = chunk.columns
        self.seen += chunk.events
        for pid, tid, name in c["threads"]:
            self._thread_names[(pid, tid)] = name
        self._memory_rows(c["memory_rows"])
        self._memory_chunk(c["memory_ts"], c["memory_args"])
        rows = int(c["rows"])
        if not rows:
            return
        offset, parts = self._rows, self._parts
        names = np.asarray(_ids(c["names"], self._names, self._intern), dtype=np.int32)
        cats = np.asarray(_ids(c["cats"], self._cats, self._new_category), dtype=np.int32)
        # views of the scanner's bytes (read-only): finish() concatenates every column into an array of its own
        parts["ts"].append(np.frombuffer(c["ts"], np.float64 if c["ts_float"] else np.int64))
        parts["dur"].append(np.frombuffer(c["dur"], np.float64 if c["dur_float"] else np.int64))
        parts["name_id"].append(names[np.frombuffer(c["name_id"], np.int32)])
        parts["cat_id"].append(cats[np.frombuffer(c["cat_id"], np.int32)])
        for key in ("pid", "tid", "stream", "correlation", "external_id"):
            parts[key].append(np.frombuffer(c[key], np.int64))
        for row, text in c["collectives"]:
            coll = _collective_args(ARGS_DECODER.decode(text))
            if coll is not None:
                self._collective_args[offset + row] = coll
        self._rows += rows

    def add_chunk(self, events: list[Any] | ScannedChunk) -> None:
        """Add one chunk of events and convert it to arrays at once (keeps Python objects to one chunk)."""
        table = self._limits
        count = events.events if isinstance(events, ScannedChunk) else len(events)
        if self.seen + count > table.max_events * 4:  # every kind of event, also those not kept
            raise table.exceeded("max_events", f"the trace has more than {self.seen + count} events")
        if isinstance(events, ScannedChunk):
            self.add_scanned(events)
        elif events and isinstance(events[0], TraceEvent):
            self.add_typed(events)
        else:
            self.add(events)
        self.flush()
        if self._rows > table.max_events:
            raise table.exceeded("max_events", f"the trace has more than {self._rows} complete events")

    def flush(self) -> None:
        """Move the accumulated rows from Python lists into numpy arrays (validated)."""
        if not self._ts:
            return
        offset = self._rows
        parts = self._parts
        parts["ts"].append(_numbers(self._ts, "ts", offset))
        parts["dur"].append(_numbers(self._dur, "dur", offset))
        parts["name_id"].append(np.asarray(self._name_id, dtype=np.int32))
        parts["cat_id"].append(np.asarray(self._cat_id, dtype=np.int32))
        parts["pid"].append(_int64(self._pid, "pid"))
        parts["tid"].append(_int64(self._tid, "tid"))
        parts["stream"].append(_int64(self._stream, "stream"))
        parts["correlation"].append(_int64(self._corr, "correlation"))
        parts["external_id"].append(_int64(self._ext, "External id"))
        self._rows += len(self._ts)
        for values in (self._ts, self._dur, self._name_id, self._cat_id, self._pid, self._tid, self._stream,
                       self._corr, self._ext):  # fmt: skip
            values.clear()

    def _thread_name(self, ev: dict[str, Any]) -> None:
        args = ev.get("args")
        if isinstance(args, dict) and isinstance(args.get("name"), str):
            pid = _as_int(ev.get("pid"), -1, self._labels)
            tid = _as_int(ev.get("tid"), -1, self._labels)
            self._thread_names[(pid, tid)] = args["name"]

    def finish(self) -> TraceColumns:
        self.flush()
        parts = self._parts

        def cat(key: str, dtype: Any) -> npt.NDArray[Any]:
            """One column whole; its chunks are let go at once (the peak holds one column twice, not all)."""
            chunks = parts.pop(key)
            if not chunks:
                return np.zeros(0, dtype=dtype)
            whole = np.concatenate(chunks)  # (also of one chunk: a scanned chunk's columns are read-only views)
            chunks.clear()
            return whole.astype(dtype, copy=False)

        floats = any(p.dtype.kind == "f" for p in parts["ts"])
        ts_raw = cat("ts", np.float64)
        dur_raw = cat("dur", np.float64)
        rounded = False
        if floats:
            # HTA: ts = ceil(ts), end = floor(ts + dur), dur = end - ts (float64 arithmetic, as pandas does)
            end = np.floor(ts_raw + dur_raw)
            ts = np.ceil(ts_raw)
            rounded = bool(np.any(ts_raw != ts))
            dur = end - ts
        else:
            ts, dur = ts_raw, dur_raw
        if ts.size and float(np.max(np.abs(ts))) > 2.0**53:
            raise TraceError("timestamps beyond 2**53 us cannot be represented exactly (not microseconds?)")
        bad = np.flatnonzero(dur_raw < 0)
        if bad.size:
            raise TraceError(f"complete event #{int(bad[0])} has a negative 'dur' ({dur_raw[bad[0]]})")
        name_id = cat("name_id", np.int32)
        self._check_durations_and_steps(dur_raw, name_id)
        most = self._limits.max_name_chars
        return TraceColumns(
            names=[clip_name(n, most) for n in self._names],
            cats=[clip_name(c, most) for c in self._cats],
            name_id=name_id,
            cat_id=cat("cat_id", np.int32),
            ts=ts,
            dur=dur,
            pid=cat("pid", np.int64),
            tid=cat("tid", np.int64),
            stream=cat("stream", np.int64),
            correlation=cat("correlation", np.int64),
            external_id=cat("external_id", np.int64),
            rounded_ns=rounded,
            collective_args=self._collective_args,
            thread_names=self._thread_names,
            labels={v: k for k, v in self._labels.items()},
            memory=self._memory.table(),
        )

    def _check_durations_and_steps(self, dur: npt.NDArray[np.float64], name_id: I32) -> None:
        table = self._limits
        longest = float(np.max(dur)) if dur.size else 0.0
        if longest > table.max_event_duration_us:
            names = list(self._names)
            culprit = names[int(name_id[int(np.argmax(dur))])] if len(name_id) == len(dur) else "?"
            raise table.exceeded("max_event_duration_us", f"event {clip_name(culprit, 200)!r} lasts {longest:g} us")
        step_ids = [i for i, n in enumerate(self._names) if n.startswith("ProfilerStep#")]
        steps = int(np.count_nonzero(id_mask(name_id, step_ids, len(self._names))))
        if steps > table.max_steps:
            raise table.exceeded("max_steps", f"the trace has {steps} ProfilerStep# events")


_PART_KEYS = ("ts", "dur", "name_id", "cat_id", "pid", "tid", "stream", "correlation", "external_id")


class _MemoryRows:
    """The `[memory]` events kept so far, in file order: a scanned chunk's as arrays, the generic paths' one by one
    (gathered into an array before the next chunk's arrays). Four float64 columns, no Python object per event."""

    def __init__(self) -> None:
        self._parts: list[F64] = []
        self._pending: list[tuple[float, float, float, float]] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def one(self, ts: float, allocated: float, reserved: float, device: int) -> None:
        self._pending.append((ts, allocated, reserved, float(device)))
        self._count += 1

    def rows(self, *columns: npt.NDArray[Any]) -> None:
        """Rows given as four columns of the same length (ts, allocated, reserved, device)."""
        if columns[0].size == 0:
            return
        self._flush()
        self._parts.append(np.column_stack(columns).astype(np.float64, copy=False))
        self._count += int(columns[0].size)

    def _flush(self) -> None:
        if self._pending:
            self._parts.append(np.array(self._pending, dtype=np.float64).reshape(-1, 4))
            self._pending.clear()

    def table(self) -> F64:
        self._flush()
        if not self._parts:
            return np.empty((0, 4), dtype=np.float64)
        return self._parts[0] if len(self._parts) == 1 else np.concatenate(self._parts)


def _numbers(values: list[Any], field_name: str, offset: int = 0) -> npt.NDArray[Any]:
    """Vectorised validation: a list of JSON numbers -> int64 or float64 array, else TraceError."""
    try:
        arr = np.asarray(values)
    except (OverflowError, ValueError) as exc:
        arr = np.asarray(values, dtype=object)
        del exc
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u":
            raise TraceError(f"'{field_name}' value out of range (more than 2**63)")
        return arr
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise TraceError(f"'{field_name}' is NaN in event #{offset + int(np.flatnonzero(np.isnan(arr))[0])}")
        return arr
    for index, value in enumerate(values, start=offset):
        if value is None:
            raise TraceError(f"complete event #{index} has no '{field_name}'")
        if type(value) is bool or not isinstance(value, (int, float)):
            raise TraceError(f"complete event #{index} has a non-numeric '{field_name}': {str(value)[:80]!r}")
        if isinstance(value, int) and abs(value) > INT64_MAX:
            raise TraceError(f"complete event #{index} has an out-of-range '{field_name}': {value}")
    raise TraceError(f"'{field_name}' values are not numbers")


def _int64(values: list[int], field_name: str) -> I64:
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError as exc:
        big = next((v for v in values if abs(v) > INT64_MAX), None)
        raise TraceError(f"'{field_name}' value out of the 64-bit range: {big}") from exc
