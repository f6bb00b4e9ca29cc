"""openAPIV3Schema validation and defaulting of custom resources."""

from __future__ import annotations

import re
from typing import Any

import jsonschema  # type: ignore[import-untyped]


def field_errors(schema: dict[str, Any], obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(field path, message) per violation; a missing required field is named itself, as the apiserver does."""
    validator = jsonschema.Draft7Validator(schema)
    out: list[tuple[str, str]] = []
    for err in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
        path = [str(p) for p in err.absolute_path]
        if err.validator == "required":
            path.append(re.sub(r"^'(.*)' is a required property$", r"\1", err.message))
        out.append((".".join(path) or "<root>", err.message))
    return out


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Fill `default`s of absent properties inside objects that are present (structural-schema semantics)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name not in value and isinstance(sub, dict) and "default" in sub:
                value[name] = _copy(sub["default"])
            if name in value and isinstance(sub, dict):
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [apply_defaults(items, v) for v in value]
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
