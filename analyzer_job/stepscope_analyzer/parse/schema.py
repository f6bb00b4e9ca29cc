"""Typed view of a Chrome-trace event for msgspec: only the fields the analyses keep are decoded.

Decoding into these structs skips every other key (and every other arg) without building Python objects for
them, which is what makes the parser faster than a generic ``orjson.loads`` of the same bytes. Values keep loose
types (``Any``) where traces disagree; the column builder validates them.
"""

from __future__ import annotations

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


class TraceEvent(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: EventArgs = msgspec.field(default_factory=EventArgs)


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
)

EVENTS_DECODER = msgspec.json.Decoder(list[TraceEvent])
