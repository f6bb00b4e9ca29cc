"""The declared shape of a node summary (analysis_documents.NodeSummary), checked before any model is built or as it is
built. Pure.

A node summary comes from a training pod's folder in storage, so it is read as untrusted input, in three steps that
each bound what the next one may build:
1. bytes: at most MAX_NODE_SUMMARY_BYTES (the analyzer refuses a larger object from its stored size, before it is
   downloaded);
2. values: `value_bound(data)`, counted on the bytes before decoding, at most MAX_NODE_SUMMARY_VALUES (every JSON value
   but the first follows a ',', '[' or '{', so the count bounds what decoding can build whatever the document holds);
3. shape: `shape_error(document)` on the decoded JSON: every list within its cap in CAPS (one entry per list field of
   the models, per nesting level), the lists that hold one entry per step, call or point of equal length (PARALLEL),
   every text within MAX_TEXT_CHARS, every number finite and within NUMBER_BOUND. The analyzer checks the same in the
   decode that builds the model (its ranks/summary_shape_decoder.py puts CAPS, PARALLEL and the bounds into the
   model's validator) and walks with `shape_error` a document that decode refuses, for the reason.

The sidecar's writer (the analyzer's node_summaries command) checks its own summary against the same shape and writes
a refusal instead of a summary that breaks it, so an honest node never sends one the analyzer would refuse. The caps
follow what the analyzer itself keeps of a trace (its memory series' bins, spans per step, calls, call floors, top-N)
and what a capture records (CaptureSpec.steps); the byte and value caps leave room for the largest honest summary (a
1,000-step capture with every per-step list full: bench/node_summary_sizes.py measures it).
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic is loaded by whoever passes a model; the caps above need none (the analyzer's limits)
    from pydantic import BaseModel

KiB, MiB = 1 << 10, 1 << 20

MAX_NODE_SUMMARY_BYTES = 8 * MiB
"""a node summary as stored (the manifest it carries included)"""
MAX_NODE_SUMMARY_VALUES = 400_000
"""JSON values in a node summary (numbers, texts, lists and objects), counted on its bytes before decoding"""
MAX_SUMMARY_STEPS = 1024
"""entries of every per-step list (a capture records at most 1,000 steps: CaptureSpec.steps)"""
MAX_SPANS_PER_STEP = 32
"""a step's phase spans (the analyzer's step_spans.MAX_SPANS)"""
MAX_MEMORY_POINTS = 240
"""points of the memory series (the analyzer's memory.MAX_POINTS bins)"""
MAX_GPU_SERIES_POINTS = 120
"""points of the GPU metrics series (report.GPU_SERIES_POINTS)"""
MAX_TOP_ITEMS = 2048
"""top kernels, top functions (2 x top-N), collectives, streams"""
MAX_SUMMARY_TOP_N = 1000
"""the top-N a node summary may be made with"""
MAX_COMM_CALLS = 1024
"""communication calls (report.MAX_COMM_CALLS), and the ops and groups they name"""
MAX_CALL_FLOORS = 128
"""op calls with their floors (the analyzer's call_floors.MAX_CALLS)"""
MAX_PROCESS_GROUPS = 64
"""process groups a rank belongs to (the analyzer's rank_summary.MAX_GROUPS)"""
MAX_GROUP_MEMBERS = 1024
"""members listed per process group (the analyzer's rank_summary.MAX_MEMBERS; larger groups list none)"""
MAX_LISTED_RANKS = 64
"""ranks named by one bottleneck"""
MAX_THROTTLE_REASONS = 64
MAX_MANIFEST_FILES = 64
MAX_MANIFEST_ERRORS = 256
MAX_TEXT_CHARS = 8192
"""one text (names are cut at 4,096 characters with a hash; errors at 4,000)"""
NUMBER_BOUND = float(1 << 53)
"""|every number| (integers exactly representable in a double; sums of a week of µs fit many times over)"""


@dataclass(frozen=True)
class Cap:
    name: str
    most: int


_STEPS = Cap("MAX_SUMMARY_STEPS", MAX_SUMMARY_STEPS)
_MEMORY = Cap("MAX_MEMORY_POINTS", MAX_MEMORY_POINTS)
_GPU = Cap("MAX_GPU_SERIES_POINTS", MAX_GPU_SERIES_POINTS)
_TOP = Cap("MAX_TOP_ITEMS", MAX_TOP_ITEMS)
_CALLS = Cap("MAX_COMM_CALLS", MAX_COMM_CALLS)
_FLOORS = Cap("MAX_CALL_FLOORS", MAX_CALL_FLOORS)

CAPS: dict[str, tuple[Cap, ...]] = {
    "StepStats.durations_us": (_STEPS,),
    "StepStats.numbers": (_STEPS,),
    "RankReport.idle_breakdown_by_stream": (_TOP,),
    "RankReport.process_groups": (Cap("MAX_PROCESS_GROUPS", MAX_PROCESS_GROUPS),),
    "ProcessGroup.ranks": (Cap("MAX_GROUP_MEMBERS", MAX_GROUP_MEMBERS),),
    "RankReport.top_kernels": (_TOP,),
    "RankReport.top_functions": (_TOP,),
    "Bottleneck.ranks": (Cap("MAX_LISTED_RANKS", MAX_LISTED_RANKS),),
    "RankReport.collectives": (_TOP,),
    "RankReport.step_phases": (_STEPS,),
    "RankReport.step_ops_outside_work": (_STEPS,),
    "RankReport.step_spans": (_STEPS, Cap("MAX_SPANS_PER_STEP", MAX_SPANS_PER_STEP)),
    "RankReport.step_dilation": (_STEPS,),
    "RankReport.step_cpu_wait": (_STEPS,),
    "CommCalls.ops": (_CALLS,),
    "CommCalls.groups": (_CALLS,),
    "CommCalls.op_index": (_CALLS,),
    "CommCalls.group_index": (_CALLS,),
    "CommCalls.peer": (_CALLS,),
    "CommCalls.toward": (_CALLS,),
    "CommCalls.step": (_CALLS,),
    "CommCalls.start_us": (_CALLS,),
    "CommCalls.dur_us": (_CALLS,),
    "CallFloors.calls": (_FLOORS,),
    "CallFloors.floor_us": (_FLOORS,),
    "CallFloors.even_us": (_FLOORS,),
    "CallFloors.odd_us": (_FLOORS,),
    "GpuMetrics.throttle": (Cap("MAX_THROTTLE_REASONS", MAX_THROTTLE_REASONS),),
    "GpuSeries.t_s": (_GPU,),
    "GpuSeries.sm_clock_mhz": (_GPU,),
    "GpuSeries.power_w": (_GPU,),
    "GpuSeries.temperature_c": (_GPU,),
    "MemoryUsage.t_ms": (_MEMORY,),
    "MemoryUsage.allocated_bytes": (_MEMORY,),
    "MemoryUsage.reserved_bytes": (_MEMORY,),
    "MemoryUsage.step_starts_ms": (_STEPS,),
    "RankManifest.files": (Cap("MAX_MANIFEST_FILES", MAX_MANIFEST_FILES),),
    "RankManifest.errors": (Cap("MAX_MANIFEST_ERRORS", MAX_MANIFEST_ERRORS),),
    "RankMeta.step_durations_ms": (_STEPS,),
}
"""every list field of the NodeSummary models ('Model.field'), its cap at each nesting level"""

PARALLEL: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "RankReport": (
        ("steps", "durations_us"),
        (),
        ("step_phases", "step_spans", "step_dilation", "step_cpu_wait", "step_ops_outside_work"),
    ),
    "StepStats": (("durations_us",), (), ("numbers",)),
    "CallFloors": (("calls",), ("floor_us", "even_us", "odd_us"), ()),
    "MemoryUsage": (("t_ms",), ("allocated_bytes",), ("reserved_bytes",)),
    "GpuSeries": (("t_s",), (), ("sm_clock_mhz", "power_w", "temperature_c")),
}
"""lists of a model that hold one entry per item of another (its path from the model): (that list, the lists of the
same length, the lists of the same length or empty); CommCalls checks its own (report.CommCalls)"""

_UNKNOWN_LIST = Cap("MAX_TOP_ITEMS", MAX_TOP_ITEMS)  # a list under a key the models do not know (refused later)


def value_bound(data: bytes) -> int:
    """At least the number of JSON values in `data` (numbers, texts, lists, objects), counted without decoding."""
    return 1 + data.count(b",") + data.count(b"[") + data.count(b"{")


class ShapeError(ValueError):
    """A node summary beyond its declared shape; the message says where and which cap."""


@dataclass(frozen=True)
class _Shape:
    """What a JSON value must look like: a model (fields by JSON key), a list (its caps, its items) or a leaf."""

    fields: dict[str, tuple[str, _Shape]] | None = None  # JSON key -> (field name, shape)
    model: str = ""
    caps: tuple[Cap, ...] = ()
    item: _Shape | None = None


_LEAF = _Shape()


def _strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _shape_of(owner: str, name: str, annotation: Any, level: int = 0) -> _Shape:
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _shape_of(owner, name, kinds[0], level) if len(kinds) == 1 else _LEAF
    if origin is list:
        caps = CAPS[f"{owner}.{name}"]
        item = _shape_of(owner, name, typing.get_args(annotation)[0], level + 1)
        return _Shape(caps=(caps[level],), item=item)
    from pydantic import BaseModel  # loaded already: a model's shape is being read

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_shape(annotation)
    return _LEAF


@cache
def model_shape(model: type[BaseModel]) -> _Shape:
    """The shape of `model`'s JSON (by alias and by name); KeyError names a list field with no entry in CAPS."""
    fields: dict[str, tuple[str, _Shape]] = {}
    shape = _Shape(fields=fields, model=model.__name__)
    for name, info in model.model_fields.items():
        inner = _shape_of(model.__name__, name, info.annotation)
        fields[name] = (name, inner)
        if info.alias:
            fields[info.alias] = (name, inner)
    return shape


def _number_error(value: float, path: str) -> str | None:
    if not math.isfinite(value):
        return f"{path or '/'} is {value}: numbers must be finite"
    if abs(value) > NUMBER_BOUND:
        return f"{path or '/'} is {value:.6g}, beyond +-2^53 (NUMBER_BOUND)"
    return None


def _leaf_error(value: Any, path: str) -> str | None:
    kind = type(value)
    if kind is float or kind is int:
        return _number_error(value, path)
    if kind is str and len(value) > MAX_TEXT_CHARS:
        return f"{path} holds {len(value):,} characters, more than {MAX_TEXT_CHARS:,} (MAX_TEXT_CHARS)"
    return None


def _numbers_error(values: list[Any], path: str) -> str | None:
    """None when `values` are numbers (None allowed) that are all finite and within bounds; a reason otherwise
    (the sum, least and largest computed in C, item by item only when one is off)."""
    try:
        present = [v for v in values if v is not None] if None in values else values
        total, low, high = math.fsum(present), min(present, default=0.0), max(present, default=0.0)
    except (TypeError, OverflowError, ValueError):
        total, low, high = math.nan, 0.0, 0.0
    if math.isfinite(total) and low >= -NUMBER_BOUND and high <= NUMBER_BOUND:
        return None
    for i, v in enumerate(values):
        error = _check(v, _LEAF, f"{path}/{i}")
        if error is not None:
            return error
    return None


def _list_error(values: list[Any], shape: _Shape, path: str) -> str | None:
    cap = shape.caps[0] if shape.caps else _UNKNOWN_LIST
    if len(values) > cap.most:
        return f"{path} holds {len(values):,} items, more than {cap.most:,} ({cap.name})"
    item = shape.item or _LEAF
    if item is _LEAF and values and type(values[0]) is not str:
        return _numbers_error(values, path)
    for i, v in enumerate(values):
        error = _check(v, item, f"{path}/{i}")
        if error is not None:
            return error
    return None


def _parallel_error(document: dict[str, Any], model: str, path: str) -> str | None:
    anchor, same, same_or_empty = PARALLEL[model]
    items: Any = document
    for key in anchor:
        items = items.get(key) if isinstance(items, dict) else None
    count = len(items) if isinstance(items, list) else 0
    for name in (*same, *same_or_empty):
        value = document.get(name)
        size = len(value) if isinstance(value, list) else 0
        if size != count and not (size == 0 and name in same_or_empty):
            return f"{path}/{name} holds {size:,} items, {path}/{'/'.join(anchor)} {count:,}: they go together"
    return None


def _object_error(document: dict[str, Any], shape: _Shape, path: str) -> str | None:
    fields = shape.fields or {}
    for key, value in document.items():
        if len(key) > MAX_TEXT_CHARS:
            return f"{path} has a key of {len(key):,} characters, more than {MAX_TEXT_CHARS:,} (MAX_TEXT_CHARS)"
        kind = type(value)
        if kind is float or kind is int:  # leaves inline: most of a document (NaN fails both comparisons)
            if -NUMBER_BOUND <= value <= NUMBER_BOUND:
                continue
        elif kind is str:
            if len(value) <= MAX_TEXT_CHARS:
                continue
        elif value is None or kind is bool:
            continue
        name, inner = fields.get(key) or (key, _LEAF)
        error = _check(value, inner, f"{path}/{name}")
        if error is not None:
            return error
    return _parallel_error(document, shape.model, path) if shape.model in PARALLEL else None


def _check(value: Any, shape: _Shape, path: str) -> str | None:
    if isinstance(value, dict):
        return _object_error(value, shape, path)
    if isinstance(value, list):
        return _list_error(value, shape, path)
    return _leaf_error(value, path)


def shape_error(document: Any, model: type[BaseModel]) -> str | None:
    """Why the decoded JSON `document` is beyond `model`'s declared shape (None: within it). Keys the model does not
    know are checked as texts, numbers and lists of the smallest caps; the model itself refuses them afterwards."""
    return _check(document, model_shape(model), "")
