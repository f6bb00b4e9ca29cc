"""Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge as merge patch."""

from __future__ import annotations

import copy
from typing import Any

from stepscope_local.kube.errors import ApiError, bad_request

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: dicts merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _parse_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise bad_request(f"invalid JSON pointer {pointer!r}")
    return [_unescape(t) for t in pointer[1:].split("/")]


def _resolve_parent(doc: Any, tokens: list[str]) -> tuple[Any, str]:
    node = doc
    for tok in tokens[:-1]:
        if isinstance(node, dict):
            if tok not in node:
                raise ApiError(422, "Invalid", f"json patch: path component {tok!r} not found")
            node = node[tok]
        elif isinstance(node, list):
            try:
                node = node[int(tok)]
            except (ValueError, IndexError) as exc:
                raise ApiError(422, "Invalid", f"json patch: bad index {tok!r}") from exc
        else:
            raise ApiError(422, "Invalid", f"json patch: cannot descend into {tok!r}")
    return node, tokens[-1]


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent, last = _resolve_parent(doc, tokens)
    if isinstance(parent, dict):
        if last not in parent:
            raise ApiError(422, "Invalid", f"json patch: path {'/'.join(tokens)!r} not found")
        return parent[last]
    if isinstance(parent, list):
        try:
            return parent[int(last)]
        except (ValueError, IndexError) as exc:
            raise ApiError(422, "Invalid", f"json patch: bad index {last!r}") from exc
    raise ApiError(422, "Invalid", "json patch: invalid path")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _resolve_parent(doc, tokens)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            idx = int(last)
            if idx > len(parent):
                raise ApiError(422, "Invalid", f"json patch: index {idx} out of range")
            parent.insert(idx, value)
    else:
        raise ApiError(422, "Invalid", "json patch: invalid add target")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    parent, last = _resolve_parent(doc, tokens)
    try:
        if isinstance(parent, dict):
            del parent[last]
        elif isinstance(parent, list):
            del parent[int(last)]
        else:
            raise ApiError(422, "Invalid", "json patch: invalid remove target")
    except (KeyError, ValueError, IndexError) as exc:
        raise ApiError(422, "Invalid", f"json patch: cannot remove {'/'.join(tokens)!r}") from exc
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902. A failing `test` op is a 422, as kopf's resourceVersion-guarded finalizer patch expects."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind = op["op"]
        tokens = _parse_pointer(op["path"])
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)
            doc = _add(_remove(doc, tokens), tokens, copy.deepcopy(op.get("value"))) if tokens else op.get("value")
        elif kind == "test":
            actual = _get(doc, tokens)
            if actual != op.get("value"):
                raise ApiError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our request: test failed at {op['path']}: "
                    f"expected {op.get('value')!r}, found {actual!r}",
                )
        elif kind in ("move", "copy"):
            src = _parse_pointer(op["from"])
            value = copy.deepcopy(_get(doc, src))
            if kind == "move":
                doc = _remove(doc, src)
            doc = _add(doc, tokens, value)
        else:
            raise bad_request(f"unknown json patch op {kind!r}")
    return doc


def apply_patch(target: dict[str, Any], content_type: str, patch: Any) -> dict[str, Any]:
    """Dispatch on the Content-Type; strategic merge patch is treated as a plain merge patch (fidelity gap)."""
    ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
    if ctype == JSON_PATCH:
        result = json_patch(target, patch)
    elif ctype in (MERGE, STRATEGIC, APPLY, "application/json"):
        result = merge_patch(target, patch)
    else:
        raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}")
    if not isinstance(result, dict):
        raise bad_request("patch result is not an object")
    return result
