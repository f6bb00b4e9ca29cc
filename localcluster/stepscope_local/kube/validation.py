"""openAPIV3Schema validation and defaulting of custom resources, with the API server's messages.

Structural violations are reported as the API server words them (`spec.storage: Required value`,
`spec.capture.steps: Invalid value: 5000: spec.capture.steps in body should be less than or equal to 1000`), never
as jsonschema's dump of the schema; CEL rules (`x-kubernetes-validations`) are evaluated by `cel.py`.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from stepscope_local.kube import cel


def _field(path: list[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _structural_message(err: Any, field: str) -> str:
    value, limit, kind = err.instance, err.validator_value, err.validator
    shown = cel.describe_value(value)
    if kind == "required":
        return "Required value"
    if kind == "enum":
        return f"Unsupported value: {shown}: supported values: " + ", ".join(json.dumps(v) for v in limit)
    if kind == "maximum":
        return f"Invalid value: {shown}: {field} in body should be less than or equal to {limit}"
    if kind == "minimum":
        return f"Invalid value: {shown}: {field} in body should be greater than or equal to {limit}"
    if kind == "maxLength":
        return f"Too long: may not be more than {limit} bytes"
    if kind == "minLength":
        return f"Invalid value: {shown}: {field} in body should be at least {limit} chars long"
    if kind == "pattern":
        return f"Invalid value: {shown}: {field} in body should match '{limit}'"
    if kind in ("maxItems", "maxProperties"):
        return f"Too many: {len(value)}: must have at most {limit} items"
    if kind in ("minItems", "minProperties"):
        return f"Invalid value: {len(value)}: {field} in body should have at least {limit} items"
    if kind == "type":
        return f"Invalid value: {shown}: {field} in body must be of type {limit}: {json.dumps(type(value).__name__)}"
    if kind in ("oneOf", "anyOf", "allOf", "not"):
        return f"Invalid value: {shown}: {field} in body must match the schema's {kind} alternatives"
    return f"Invalid value: {shown}: {err.message[:200]}"


def field_errors(schema: dict[str, Any], obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(field path, message) per structural violation; a missing required field is named itself, as the API
    server does."""
    validator = jsonschema.Draft7Validator(schema)
    out: list[tuple[str, str]] = []
    for err in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
        path = list(err.absolute_path)
        if err.validator == "required":
            missing = [r for r in err.validator_value if isinstance(err.instance, dict) and r not in err.instance]
            path.append(missing[0] if missing else "?")
        field = _field(path) or "<root>"
        out.append((field, _structural_message(err, field)))
    return out


def validation_errors(
    schema: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None = None
) -> list[tuple[str, str]]:
    """Everything the API server would refuse in a custom resource: its schema, then its CEL rules (transition
    rules only when `old`, the stored object, is given)."""
    problems = field_errors(schema, obj)
    if cel.has_rules(schema):
        problems += cel.rule_errors(schema, obj, cel.MISSING if old is None else old)
    return problems


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
