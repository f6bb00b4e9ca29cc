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


def prune(schema: dict[str, Any], value: Any, root: bool = True) -> Any:
    """Structural-schema pruning: drop fields the schema does not declare, as the apiserver does silently
    (unless `x-kubernetes-preserve-unknown-fields`). apiVersion, kind and metadata of the root are kept."""
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            props = schema.get("properties") or {}
            for name, sub in props.items():
                if name in value and isinstance(sub, dict):
                    value[name] = prune(sub, value[name], root=False)
            return value
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is None and isinstance(extra, dict):
            return {k: prune(extra, v, root=False) for k, v in value.items()}
        if props is None:
            return value if schema.get("type") != "object" or root else {}
        kept: dict[str, Any] = {}
        for name, item in value.items():
            if name in props:
                kept[name] = prune(props[name], item, root=False) if name != "metadata" or not root else item
            elif root and name in ("apiVersion", "kind", "metadata"):
                kept[name] = item
        return kept
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(schema["items"], v, root=False) for v in value]
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
