"""Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902, the jsonpatch library), strategic merge as
merge patch."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

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


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 through the jsonpatch library, on a copy. A failing `test` op is a 422, as kopf's
    resourceVersion-guarded finalizer patch expects; an operation that cannot apply is a 422 too, a malformed one
    a 400."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    try:
        return jsonpatch.apply_patch(target, ops, in_place=False)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise ApiError(
            422,
            "Invalid",
            f"the server rejected our request due to an error in our request: test failed: {exc}",
        ) from exc
    except (jsonpatch.JsonPatchConflict, jsonpatch.JsonPointerException) as exc:
        raise ApiError(422, "Invalid", f"json patch: {exc}") from exc
    except (jsonpatch.InvalidJsonPatch, TypeError, KeyError) as exc:
        raise bad_request(f"invalid json patch: {exc}") from exc


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
