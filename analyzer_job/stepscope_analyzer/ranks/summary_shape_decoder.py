"""A node summary's declared shape (stepscope_contract.node_summary_shape) as one typed, bounded decode of its bytes.

`shape_decoder()` is a msgspec decoder for structs made from the NodeSummary models: each field under its JSON name,
no unknown field, every list with its cap from CAPS (per nesting level) as a length constraint, every number finite
and within NUMBER_BOUND, every text (an enum member's or a date's too) within MAX_TEXT_CHARS, and the lists of PARALLEL
checked to go together once their struct is decoded. It stops at the first value beyond its bound and keeps nothing of
what it decodes: it is a check, made in C, of what node_summary_shape's walk (`shape_error`) checks on a decoded
document in Python. Whatever it accepts, that walk accepts too; what it refuses may still be within the shape (a
model field named in snake case, an integer written as 1.0), so the reader then decodes the document and walks it
for the reason in the shape's words (ranks.node_summaries). A field of a kind it does not know how to bound raises
TypeError when the decoder is made (a test makes it), so a new kind of field cannot pass unchecked. `value_bound` is
node_summary_shape's count of the values a document may hold, made in numpy, that the reader applies before decoding.
"""

from __future__ import annotations

import datetime
import enum
import functools
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from pydantic import BaseModel

from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.node_summary_shape import CAPS, MAX_TEXT_CHARS, NUMBER_BOUND, PARALLEL

_FLOAT = Annotated[float, msgspec.Meta(ge=-NUMBER_BOUND, le=NUMBER_BOUND)]
_INT = Annotated[int, msgspec.Meta(ge=-int(NUMBER_BOUND), le=int(NUMBER_BOUND))]
_TEXT = Annotated[str, msgspec.Meta(max_length=MAX_TEXT_CHARS)]


def _parallel(model: str) -> Callable[[Any], None]:
    """The __post_init__ of `model`'s struct: its PARALLEL lists go together (as node_summary_shape checks them)."""
    anchor, same, same_or_empty = PARALLEL[model]

    def check(value: Any) -> None:
        items: Any = value
        for name in anchor:
            items = getattr(items, name, None)
        count = len(items) if isinstance(items, list) else 0
        for name in (*same, *same_or_empty):
            listed = getattr(value, name)
            size = len(listed) if isinstance(listed, list) else 0
            if size != count and not (size == 0 and name in same_or_empty):
                raise ValueError(f"{model}.{name} holds {size} items, {'.'.join(anchor)} {count}: they go together")

    return check


def _bounded(owner: str, field: str, annotation: Any, level: int, structs: dict[type, Any]) -> Any:
    """The msgspec type of `owner.field`'s `annotation` (at list nesting `level`) with the declared shape's bounds."""
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"{owner}.{field}: a union of {kinds}, which the shape decoder does not bound")
        return _bounded(owner, field, kinds[0], level, structs) | None
    if origin is list:
        item = _bounded(owner, field, typing.get_args(annotation)[0], level + 1, structs)
        return Annotated[list[item], msgspec.Meta(max_length=CAPS[f"{owner}.{field}"][level].most)]  # type: ignore[valid-type]
    if annotation is float:
        return _FLOAT
    if annotation is int:
        return _INT
    if annotation is bool:
        return bool
    if annotation is str or (isinstance(annotation, type) and issubclass(annotation, (enum.Enum, datetime.datetime))):
        return _TEXT  # the model checks the member or the date
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _struct(annotation, structs)
    raise TypeError(f"{owner}.{field}: {annotation!r}, which the shape decoder does not bound")


def _struct(model: type[BaseModel], structs: dict[type, Any]) -> Any:
    if model not in structs:
        fields = [
            (name, _bounded(model.__name__, name, info.annotation, 0, structs),
             msgspec.field(default=None, name=info.alias or name))
            for name, info in model.model_fields.items()
        ]  # fmt: skip
        namespace = {"__post_init__": _parallel(model.__name__)} if model.__name__ in PARALLEL else None
        structs[model] = msgspec.defstruct(
            f"Bounded{model.__name__}", fields, namespace=namespace, forbid_unknown_fields=True, gc=False
        )
    return structs[model]


@functools.cache
def shape_decoder() -> msgspec.json.Decoder[Any]:
    """The decoder of a NodeSummary within its declared shape: `decode(data)` raises msgspec.DecodeError (its
    ValidationError included) for one it cannot tell is within it."""
    return msgspec.json.Decoder(_struct(NodeSummary, {}))


def value_bound(data: bytes) -> int:
    """node_summary_shape.value_bound(data) (at least the JSON values in `data`: 1 + its ',', '[' and '{'), counted
    with numpy, without copying the bytes (numpy is imported on first use: the pipeline's imports stay light)."""
    import numpy as np

    view = np.frombuffer(data, np.uint8)
    return 1 + sum(int(np.count_nonzero(view == c)) for c in b",[{")


def within_shape(data: bytes) -> bool:
    """Whether `data` is a NodeSummary document within its declared shape, as far as the decoder can tell."""
    try:
        shape_decoder().decode(data)
    except msgspec.DecodeError:
        return False
    return True
