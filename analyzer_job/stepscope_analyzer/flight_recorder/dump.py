"""A rank's Flight Recorder dump (flight_recorder.json.gz), decoded into typed, bounded structs.

The dump is JSON in PyTorch's own layout (the pickle that `torch._C._distributed_c10d._dump_fr_trace` returns,
written as JSON by stepscope's hook; stepscope never unpickles anything), plus a "stepscope" block with the rank, the
reason, the dump time and the global ranks of every process group (gloo leaves `pg_config` empty). Whatever a file
holds, reading it is bounded: compressed and inflated size, entries, frames, tensors, text lengths and process
groups; a file beyond a bound is rejected with a message that names the bound, like a bad trace.

What the analysis keeps of a dump is `compact`: each entry holds only the frame that names its call site (the one
`calls.call_site` picks), so a rank's dump costs about its entries and tensor sizes (`retained_cost`), which the
loader charges against one budget per analysis.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from stepscope_analyzer.flight_recorder.call_site import call_site_frame
from stepscope_analyzer.parse.stream import InflateError, inflate_bounded

MAX_COMPRESSED_BYTES = 32 * 1024 * 1024
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 50_000
MAX_FRAMES = 64
MAX_TENSORS = 1024
MAX_DIMS = 16
MAX_TEXT = 4096
MAX_GROUPS = 4096
MAX_WORLD = 1 << 20
MAX_RANKS_TEXT = 16 * 1024 * 1024

Text = Annotated[str, Meta(max_length=MAX_TEXT)]
Count = Annotated[int, Meta(ge=-1, le=2**62)]
Rank = Annotated[int, Meta(ge=0, lt=MAX_WORLD)]
Sizes = Annotated[
    list[Annotated[list[Annotated[int, Meta(ge=0, le=2**62)]], Meta(max_length=MAX_DIMS)]],
    Meta(max_length=MAX_TENSORS),
]
Dtypes = Annotated[list[Text], Meta(max_length=MAX_TENSORS)]


class FlightRecorderError(ValueError):
    """A dump that cannot be used: not gzip/JSON, beyond a bound, or not shaped like a Flight Recorder dump."""


class Frame(msgspec.Struct, frozen=True, gc=False):
    name: Text = ""
    filename: Text = ""
    line: Annotated[int, Meta(ge=0, le=2**31)] = 0


class Entry(msgspec.Struct, frozen=True, gc=False):
    """One recorded collective (PyTorch's field names)."""

    process_group: Annotated[list[Text], Meta(min_length=1, max_length=2)]
    profiling_name: Text
    collective_seq_id: Count = 0
    p2p_seq_id: Count = 0
    record_id: Count = 0
    pg_id: Count = 0
    input_sizes: Sizes = []
    output_sizes: Sizes = []
    input_dtypes: Dtypes = []
    output_dtypes: Dtypes = []
    state: Text = ""
    retired: bool = False
    is_p2p: bool = False
    time_created_ns: Annotated[int, Meta(ge=0, le=2**63 - 1)] = 0
    frames: Annotated[list[Frame], Meta(max_length=MAX_FRAMES)] = []


class PgStatus(msgspec.Struct, frozen=True, gc=False):
    last_enqueued_collective: int | Text = -1
    last_completed_collective: int | Text = -1


class PgConfig(msgspec.Struct, frozen=True, gc=False):
    name: Text = ""
    desc: Text = ""
    ranks: Annotated[str, Meta(max_length=MAX_RANKS_TEXT)] = ""


class GroupInfo(msgspec.Struct, frozen=True, gc=False):
    desc: Text = ""
    ranks: Annotated[list[Rank], Meta(max_length=MAX_WORLD)] = []


class StepscopeInfo(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    rank: Rank | None = None
    world_size: Annotated[int, Meta(ge=1, le=MAX_WORLD)] | None = None
    reason: Text = ""
    dumped_at_ns: Annotated[int, Meta(ge=0, le=2**63 - 1)] | None = None
    torch_version: Text = ""
    process_groups: Annotated[dict[Text, GroupInfo], Meta(max_length=MAX_GROUPS)] = {}


class Dump(msgspec.Struct, frozen=True, gc=False):
    version: Text = ""
    entries: Annotated[list[Entry], Meta(max_length=MAX_ENTRIES)] = []
    pg_status: Annotated[dict[Text, PgStatus], Meta(max_length=MAX_GROUPS)] = {}
    pg_config: Annotated[dict[Text, PgConfig], Meta(max_length=MAX_GROUPS)] = {}
    stepscope: StepscopeInfo | None = None

    def last_completed(self, pg_id: int) -> int | None:
        """The last completed collective sequence number of a process group (by its uid), when recorded."""
        status = self.pg_status.get(str(pg_id))
        if status is None:
            return None
        value = status.last_completed_collective
        try:
            return int(value)
        except ValueError:
            return None

    def group_ranks(self) -> dict[str, list[int]]:
        """Process group name -> global ranks, from stepscope's block, else from PyTorch's pg_config."""
        if self.stepscope is not None and self.stepscope.process_groups:
            return {name: sorted(g.ranks) for name, g in self.stepscope.process_groups.items() if g.ranks}
        out: dict[str, list[int]] = {}
        for key, cfg in self.pg_config.items():
            ranks = _ranks_text(cfg.ranks)
            if ranks and (cfg.name or key):
                out[cfg.name or key] = ranks
        return out


_DECODER = msgspec.json.Decoder(Dump)


def _ranks_text(text: str) -> list[int]:
    """PyTorch writes a group's ranks as text, '[0, 1, 2]'; anything else is no information."""
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if not isinstance(value, list) or not all(isinstance(r, int) and 0 <= r < MAX_WORLD for r in value):
        return []
    return sorted(set(value))


def inflate(raw: bytes, origin: str, max_json: int = MAX_JSON_BYTES, max_stored: int = MAX_COMPRESSED_BYTES) -> bytes:
    """The JSON bytes of a dump file (gzip or plain), refusing what exceeds the bounds."""
    if len(raw) > max_stored:
        raise FlightRecorderError(f"{origin} is {len(raw):,} bytes, more than the {max_stored:,} allowed")
    try:
        data, complete = inflate_bounded(raw, max_json)
    except InflateError as exc:
        raise FlightRecorderError(f"{origin} {exc}") from exc
    if not complete:
        raise FlightRecorderError(f"{origin} is a truncated gzip stream")
    return data


def parse_dump(
    raw: bytes,
    origin: str = "flight_recorder.json.gz",
    max_json: int = MAX_JSON_BYTES,
    max_stored: int = MAX_COMPRESSED_BYTES,
) -> Dump:
    """Decode one dump file; FlightRecorderError says what is wrong with it."""
    data = inflate(raw, origin, max_json, max_stored)
    del raw
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise FlightRecorderError(f"{origin} is not a usable Flight Recorder dump: {str(exc)[:500]}") from exc
    except msgspec.DecodeError as exc:
        raise FlightRecorderError(f"{origin} is not valid JSON: {str(exc)[:300]}") from exc


ENTRY_COST = 256  # bytes of a compacted Entry beyond what it shares (measured with tracemalloc)
TEXT_COST = 56  # a str beyond its characters
LIST_COST = 64  # a list beyond its pointers
POINTER = 8
INT_COST = 32


class Interner:
    """One analysis's table of the values dumps repeat (texts, dtype lists, tensor sizes, call-site frames): equal
    values are kept once, across entries and ranks, and `cost` counts the bytes of the distinct ones."""

    def __init__(self) -> None:
        self._seen: dict[object, Any] = {}
        self.cost = 0

    def _keep(self, key: object, value: Any, cost: int) -> Any:
        kept = self._seen.get(key)
        if kept is None:
            self._seen[key] = kept = value
            self.cost += cost
        return kept

    def text(self, value: str) -> str:
        return str(self._keep(("t", value), value, TEXT_COST + len(value) + LIST_COST))  # the str and its key

    def texts(self, values: list[str]) -> list[str]:
        key = ("ts", *values)
        kept: list[str] = self._keep(key, [self.text(v) for v in values], 2 * (LIST_COST + POINTER * len(values)))
        return kept

    def sizes(self, values: list[list[int]]) -> list[list[int]]:
        key = ("s", *(tuple(d) for d in values))
        lists = LIST_COST + POINTER * len(values) + sum(LIST_COST + POINTER * len(d) for d in values)
        ints = sum(1 for d in values for v in d if not -5 <= v <= 256)  # small ints are shared by Python
        cost = 2 * lists + INT_COST * ints  # the lists and their key
        kept: list[list[int]] = self._keep(key, values, cost)
        return kept

    def frames(self, frame: Frame | None) -> list[Frame]:
        if frame is None:
            return []
        key = ("f", frame.name, frame.filename, frame.line)
        cost = 2 * LIST_COST + POINTER * 5 + 64 + TEXT_COST * 2 + len(frame.name) + len(frame.filename)
        kept: list[Frame] = self._keep(key, [frame], cost)
        return kept


def compact(dump: Dump, interner: Interner | None = None) -> Dump:
    """The dump with each entry's frames cut to the one that names its call site (call_site.call_site_frame) and its
    repeated values shared through `interner`; nothing the analysis reads changes."""
    table = interner if interner is not None else Interner()
    entries = [
        msgspec.structs.replace(
            entry,
            process_group=table.texts(entry.process_group),
            profiling_name=table.text(entry.profiling_name),
            input_sizes=table.sizes(entry.input_sizes),
            output_sizes=table.sizes(entry.output_sizes),
            input_dtypes=table.texts(entry.input_dtypes),
            output_dtypes=table.texts(entry.output_dtypes),
            state=table.text(entry.state),
            frames=table.frames(call_site_frame(entry.frames)),
        )
        for entry in dump.entries
    ]
    return msgspec.structs.replace(dump, entries=entries)


def own_cost(dump: Dump) -> int:
    """About how many bytes a compacted dump holds beyond what its interner shares (the per-analysis budget counts
    this plus the interner's growth)."""
    cost = ENTRY_COST * len(dump.entries)
    groups = dump.stepscope.process_groups.values() if dump.stepscope is not None else ()
    cost += sum(LIST_COST + POINTER * len(g.ranks) for g in groups)
    cost += sum(256 + len(c.ranks) for c in dump.pg_config.values()) + 256 * len(dump.pg_status)
    return cost
