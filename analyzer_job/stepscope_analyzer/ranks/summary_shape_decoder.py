"""A node summary's declared shape (stepscope_contract.node_summary_shape) built into the model's own validator, so
that one typed, bounded decode of its bytes both checks the shape and builds the NodeSummary.

`bounded_validator()` is NodeSummary's pydantic-core validator with, at every place of its schema, what
node_summary_shape's walk (`shape_error`) checks there: every list its cap from CAPS (per nesting level), every number
finite and within NUMBER_BOUND, every text within MAX_TEXT_CHARS, and the lists of PARALLEL of one length once their
model is built. The models forbid unknown keys, so whatever it accepts the walk accepts too, and what it returns is
what `NodeSummary.model_validate_json` returns. What it refuses may still be within the shape (a field the models
refuse, a field named in snake case), so the reader then decodes the document and walks it for the reason in the
shape's or the model's words (ranks.node_summaries).

pydantic-core compiles a model that already has its own validator by reusing that validator, which would leave the
nested models unbounded: the bounded schema is compiled while the models say they are not complete (pydantic's own
way to have a model compiled anew, as model_rebuild does), once, under a lock. A probe beyond the shape deep in the
document must then be refused; where it is not (another pydantic-core), `bounded_validator()` is None and the reader
walks every document. A schema of a kind this module does not know how to bound raises TypeError when the validator
is built (a test builds it), so a new kind of field cannot pass unchecked. `value_bound` is node_summary_shape's count
of the values a document may hold, made with numpy, which the reader applies before decoding.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError, SchemaValidator

from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.node_summary_shape import CAPS, MAX_TEXT_CHARS, NUMBER_BOUND, PARALLEL

_LEAVES = {"bool", "datetime", "enum", "none", "definition-ref"}
"""kinds of schema with nothing to bound beyond what the model checks (a date and an enum member are short)"""
_WRAPPERS = {"default", "nullable", "function-after", "function-before", "function-wrap"}
"""kinds of schema that hold one inner schema under 'schema'"""
PROBE = {"analyzerVersion": "probe", "topN": 1, "summary": {"rank": 0, "steps": {"durations_us": [1e300]}}}
"""a document beyond the shape (a number past NUMBER_BOUND) in a nested model: the bounded validator refuses it"""


def _parallel(model: str) -> Callable[[Any], Any]:
    """The check after `model` is built: its PARALLEL lists go together (as node_summary_shape checks them)."""
    anchor, same, same_or_empty = PARALLEL[model]

    def check(value: Any) -> Any:
        items: Any = value
        for name in anchor:
            items = getattr(items, name, None)
        count = len(items) if isinstance(items, list) else 0
        for name in (*same, *same_or_empty):
            listed = getattr(value, name, None)
            size = len(listed) if isinstance(listed, list) else 0
            if size != count and not (size == 0 and name in same_or_empty):
                context = {"name": name, "size": size, "anchor": ".".join(anchor), "count": count}
                raise PydanticCustomError("parallel", "{name} holds {size} items, {anchor} {count}: they go together",
                                          context)  # fmt: skip
        return value

    return check


def _number(schema: dict[str, Any]) -> dict[str, Any]:
    most: float = NUMBER_BOUND if schema["type"] == "float" else int(NUMBER_BOUND)
    bounded = {**schema, "ge": max(schema.get("ge", -most), -most), "le": min(schema.get("le", most), most)}
    if schema["type"] == "float":
        bounded["allow_inf_nan"] = False
    return bounded


def _model(schema: dict[str, Any], models: set[type[BaseModel]]) -> dict[str, Any]:
    cls = schema["cls"]
    models.add(cls)
    inner = {**schema, "schema": _bounded(schema["schema"], cls.__name__, "", 0, models)}
    if cls.__name__ not in PARALLEL:
        return inner
    ref = inner.pop("ref", None)
    checked = {"type": "function-after", "function": {"type": "no-info", "function": _parallel(cls.__name__)},
               "schema": inner}  # fmt: skip
    return checked if ref is None else {**checked, "ref": ref}


def _bounded(
    schema: dict[str, Any], owner: str, field: str, level: int, models: set[type[BaseModel]]
) -> dict[str, Any]:
    """`schema` (field `owner.field`'s, at list nesting `level`) with the declared shape's bounds; the models met are
    added to `models`."""
    kind = schema["type"]
    if kind == "definitions":
        return {**schema, "schema": _bounded(schema["schema"], owner, field, level, models),
                "definitions": [_bounded(d, owner, field, level, models) for d in schema["definitions"]]}  # fmt: skip
    if kind == "model":
        return _model(schema, models)
    if kind == "model-fields":
        fields = {n: {**f, "schema": _bounded(f["schema"], owner, n, 0, models)} for n, f in schema["fields"].items()}
        return {**schema, "fields": fields}
    if kind == "list":
        cap = CAPS[f"{owner}.{field}"][level].most
        return {**schema, "max_length": min(schema.get("max_length", cap), cap),
                "items_schema": _bounded(schema["items_schema"], owner, field, level + 1, models)}  # fmt: skip
    if kind in ("float", "int"):
        return _number(schema)
    if kind == "str":
        return {**schema, "max_length": min(schema.get("max_length", MAX_TEXT_CHARS), MAX_TEXT_CHARS)}
    if kind in _WRAPPERS:
        return {**schema, "schema": _bounded(schema["schema"], owner, field, level, models)}
    if kind in _LEAVES:
        return schema
    raise TypeError(f"{owner}.{field}: a {kind!r} schema, which the bounded validator does not know how to bound")


def bounded_schema(model: type[BaseModel]) -> tuple[dict[str, Any], set[type[BaseModel]]]:
    """`model`'s core schema with the declared shape's bounds, and the models it holds."""
    model.model_rebuild()  # a model of deferred build has its schema on first use
    models: set[type[BaseModel]] = set()
    return _bounded(dict(model.__pydantic_core_schema__), model.__name__, "", 0, models), models


def _compiled(schema: dict[str, Any], models: set[type[BaseModel]]) -> SchemaValidator:
    """`schema` compiled with every model of `models` compiled anew from it (not its own validator reused)."""
    complete = [m for m in models if m.__dict__.get("__pydantic_complete__") is True]
    try:
        for m in complete:
            m.__pydantic_complete__ = False
        return SchemaValidator(schema)
    finally:
        for m in complete:
            m.__pydantic_complete__ = True


def _refuses_probe(validator: SchemaValidator) -> bool:
    try:
        validator.validate_json(json.dumps(PROBE))
    except ValidationError:
        return True
    return False


_LOCK = threading.Lock()
_BUILT: list[SchemaValidator | None] = []


def bounded_validator() -> SchemaValidator | None:
    """NodeSummary's validator with its declared shape (built on first use); None where this pydantic-core would not
    apply the bounds (the probe passes)."""
    if not _BUILT:
        with _LOCK:
            if not _BUILT:
                validator = _compiled(*bounded_schema(NodeSummary))
                _BUILT.append(validator if _refuses_probe(validator) else None)
    return _BUILT[0]


def value_bound(data: bytes) -> int:
    """node_summary_shape.value_bound(data) (at least the JSON values in `data`: 1 + its ',', '[' and '{'), counted
    with numpy, without copying the bytes (numpy is imported on first use: the pipeline's imports stay light)."""
    import numpy as np

    view = np.frombuffer(data, np.uint8)
    comma, bracket, brace = (int(np.count_nonzero(view == ord(c))) for c in ",[{")
    return 1 + comma + bracket + brace
