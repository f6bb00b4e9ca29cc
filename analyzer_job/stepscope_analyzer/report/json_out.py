"""JSON bytes of contract models that stay valid UTF-8 whatever names the traces held."""

from __future__ import annotations

import json

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError


def model_json_bytes(model: BaseModel, *, indent: int | None = 1) -> bytes:
    """UTF-8 JSON of a model. Serialised straight to bytes by pydantic's serializer: no intermediate tree of dicts
    and no text copy, which at 1,024 ranks was most of the reduce's peak memory (the model, its dict tree, the text
    and its bytes at once). A name with a lone surrogate (an undecodable name in a trace) cannot be UTF-8: such a
    model goes through the slower path, where it becomes '?'. (A non-finite float, which the contract's
    models do not hold, would come out as null on the fast path.)"""
    try:
        return model.__pydantic_serializer__.to_json(model, indent=indent)
    except PydanticSerializationError:
        data = model.model_dump(mode="json")
        text = json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False, default=str)
        return text.encode("utf-8", "replace")
