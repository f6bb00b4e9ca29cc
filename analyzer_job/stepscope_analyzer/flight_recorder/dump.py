"""A rank's Flight Recorder dump (flight_recorder.json.gz), decoded into typed, bounded structs.

The dump is JSON in PyTorch's own layout (the pickle that `torch._C._distributed_c10d._dump_fr_trace` returns,
written as JSON by stepscope's hook; stepscope never unpickles anything), plus a "stepscope" block with the rank, the
reason, the dump time and the global ranks of every process group (gloo leaves `pg_config` empty). Whatever a file
holds, reading it is bounded: compressed and inflated size, entries, frames, tensors, text lengths and process
groups; a file beyond a bound is rejected with a message that names the bound, like a bad trace.
"""

from __future__ import annotations

import json
from typing import Annotated

import msgspec
from msgspec import Meta

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


def inflate(raw: bytes, origin: str) -> bytes:
    """The JSON bytes of a dump file (gzip or plain), refusing what exceeds the bounds."""
    if len(raw) > MAX_COMPRESSED_BYTES:
        raise FlightRecorderError(f"{origin} is {len(raw):,} bytes, more than the {MAX_COMPRESSED_BYTES:,} allowed")
    try:
        data, complete = inflate_bounded(raw, MAX_JSON_BYTES)
    except InflateError as exc:
        raise FlightRecorderError(f"{origin} {exc}") from exc
    if not complete:
        raise FlightRecorderError(f"{origin} is a truncated gzip stream")
    return data


def parse_dump(raw: bytes, origin: str = "flight_recorder.json.gz") -> Dump:
    """Decode one dump file; FlightRecorderError says what is wrong with it."""
    data = inflate(raw, origin)
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise FlightRecorderError(f"{origin} is not a usable Flight Recorder dump: {str(exc)[:500]}") from exc
    except msgspec.DecodeError as exc:
        raise FlightRecorderError(f"{origin} is not valid JSON: {str(exc)[:300]}") from exc
