"""Server-side field validation (`?fieldValidation=Strict|Warn|Ignore`), as kubectl 1.27+ asks for it.

The API server decodes a request against the kind's schema: with `Strict`, a field the schema does not declare is an
error (`strict decoding error: unknown field "spec.foo"`); with `Warn`, a `Warning` header; with `Ignore` (and for
clients that send nothing) the field is dropped silently, as structural pruning does. Built-in kinds are checked
against their upstream definitions (`openapi.py`), custom resources against their CRD's openAPIV3Schema.
"""

from __future__ import annotations

from typing import Any

from stepscope_local.kube import errors
from stepscope_local.kube.openapi import OBJECT_META, builtin_definitions, kind_schemas, resolve
from stepscope_local.kube.resources import ResourceType

MAX_REPORTED = 10


def _walk(schema: dict[str, Any], value: Any, path: str, out: list[str]) -> None:
    schema = resolve(schema)
    if len(out) >= MAX_REPORTED or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is None and isinstance(extra, dict):
            for key, item in value.items():
                _walk(extra, item, f"{path}.{key}", out)
            return
        if props is None:
            return
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key in props:
                _walk(props[key], item, where, out)
            else:
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{index}]", out)


def unknown_fields(rtype: ResourceType, body: Any) -> list[str]:
    """Dotted paths of the fields in `body` that the kind's schema does not declare."""
    if not isinstance(body, dict):
        return []
    (schema,) = kind_schemas(rtype).values()
    out: list[str] = []
    for key, item in body.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            _walk(builtin_definitions()[OBJECT_META], item, "metadata", out)
        elif key in (schema.get("properties") or {}):
            _walk(schema["properties"][key], item, key, out)
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            out.append(key)
    return out


def check(rtype: ResourceType, body: Any, directive: str | None) -> list[str]:
    """Apply the request's directive: raise for Strict, return the warnings for Warn, nothing otherwise."""
    if directive not in ("Strict", "Warn"):
        return []
    unknown = unknown_fields(rtype, body)
    if not unknown:
        return []
    messages = [f'unknown field "{field}"' for field in unknown]
    if directive == "Strict":
        detail = ", ".join(messages) if len(messages) > 1 else messages[0]
        raise errors.bad_request(
            f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
            f"strict decoding error: {detail}"
        )
    return messages
