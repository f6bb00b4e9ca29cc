"""Typed view of a Chrome-trace event for msgspec: only the fields the analyses keep are decoded.

Decoding into these structs skips every other key (and every other arg) without building Python objects for
them, which is what makes the parser faster than a generic ``orjson.loads`` of the same bytes. Values keep loose
types (``Any``) where traces disagree; the column builder validates them.
"""

from __future__ import annotations

import functools
import operator
from types import GenericAlias
from typing import Any

import msgspec


class EventArgs(msgspec.Struct, gc=False):
    stream: Any = -1
    correlation: Any = -1
    external_id: Any = msgspec.field(default=-1, name="External id")
    name: Any = None  # thread_name / process_name metadata events
    collective_name: Any = msgspec.field(default=None, name="Collective name")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    pg_id: Any = msgspec.field(default=None, name="Process Group ID")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    group_size: Any = msgspec.field(default=None, name="Group size")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    src_rank: Any = msgspec.field(default=None, name="Src Rank")
    dst_rank: Any = msgspec.field(default=None, name="Dst Rank")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")  # `[memory]` events (profile_memory)
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")


class TraceEvent(msgspec.Struct, tag_field="ph", gc=False):
    """Base of every decoded event; the subclass is chosen by the event's ``ph``."""


class FlowEvent(TraceEvent):
    """Flow events (``ph`` s/t/f) link other events and carry nothing the analyses keep: no field is decoded."""

    cat = None
    dur = None
    name = None


def _full_event(tag: str) -> Any:
    fields: list[tuple[str, Any, Any]] = [
        ("cat", Any, None),
        ("name", Any, ""),
        ("pid", Any, None),
        ("tid", Any, None),
        ("ts", Any, None),
        ("dur", Any, None),
        ("args", EventArgs | None, None),
    ]
    name = "MetaEvent" if tag == "M" else f"PhaseEvent_{ord(tag)}"
    return msgspec.defstruct(name, fields, bases=(TraceEvent,), tag=tag, gc=False, module=__name__)


FLOW_TYPES: tuple[Any, ...] = tuple(
    msgspec.defstruct(f"Flow_{t}", [], bases=(FlowEvent,), tag=t, gc=False) for t in "stf"
)
# Every other Chrome-trace phase decodes all kept fields; an unknown phase sends the chunk to the generic path.
FULL_TYPES: tuple[Any, ...] = tuple(_full_event(t) for t in "XMiICBEbenPNODRVvc()")
META_TYPE: Any = FULL_TYPES[1]

# (struct attribute, trace arg name) of the args kept for collectives
COLLECTIVE_FIELDS = (
    ("collective_name", "Collective name"),
    ("pg_name", "Process Group Name"),
    ("pg_desc", "Process Group Description"),
    ("pg_id", "Process Group ID"),
    ("pg_ranks", "Process Group Ranks"),
    ("group_size", "Group size"),
    ("in_nelems", "In msg nelems"),
    ("out_nelems", "Out msg nelems"),
    ("dtype", "dtype"),
    ("src_rank", "Src Rank"),
    ("dst_rank", "Dst Rank"),
)

EVENTS_DECODER: Any = msgspec.json.Decoder(
    GenericAlias(list, (functools.reduce(operator.or_, FLOW_TYPES + FULL_TYPES),))
)
ARGS_DECODER: Any = msgspec.json.Decoder(EventArgs)
"""an event's args object alone (the native scanner hands over collectives' args as text)"""


class MemoryArgs(msgspec.Struct, gc=False):
    """A `[memory]` event's args when every kept value is a number (the native scanner hands their texts over)."""

    total_allocated: float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: float | None = msgspec.field(default=None, name="Total Reserved")
    device_type: int | None = msgspec.field(default=None, name="Device Type")


MEMORY_ARGS_DECODER: Any = msgspec.json.Decoder(list[MemoryArgs])
"""a chunk's `[memory]` args in one call; a value of another type fails the whole list (then: one at a time)"""
RAW_LIST_DECODER: Any = msgspec.json.Decoder(list[msgspec.Raw])
"""a JSON array's elements, each as its own text"""
