"""JSON bytes of contract models that stay valid UTF-8 whatever names the traces held."""

from __future__ import annotations

import json

from pydantic import BaseModel


def model_json_bytes(model: BaseModel, *, indent: int | None = 1) -> bytes:
    """UTF-8 JSON of a model; lone surrogates (from undecodable names) become U+FFFD-like '?' replacements."""
    data = model.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False, default=str)
    return text.encode("utf-8", "replace")
