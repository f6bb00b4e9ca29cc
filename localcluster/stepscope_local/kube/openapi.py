"""OpenAPI documents of what the emulator serves: v3 (`/openapi/v3`, one document per group-version) and v2
(`/openapi/v2`, JSON), built from the built-in kinds' upstream definitions and each registered CRD's schema.

kubectl needs them: `kubectl apply` looks for the `fieldValidation` parameter on the PATCH operation of the kind (found:
the server validates, `fieldValidation=Strict`; the emulator honours it in `field_validation.py`), and `kubectl
explain` walks the schema carrying the kind's `x-kubernetes-group-version-kind`. The built-in definitions are those of
Kubernetes 1.32 (the version the emulator reports), read from the kubernetes-validate package, which ships them as
JSON Schema; they are turned back into OpenAPI form (`type: [X, "null"]` -> `X`, `$ref` -> components).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

from stepscope_local.kube.resources import ResourceType

KUBERNETES_VERSION = "v1.32.0"
V3_PREFIX = "#/components/schemas/"
V2_PREFIX = "#/definitions/"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_WRITE_PARAMS = [
    {
        "name": "fieldValidation",
        "in": "query",
        "description": "how the server treats unknown fields: Ignore, Warn or Strict",
        "schema": {"type": "string", "uniqueItems": True},
    },
    {"name": "dryRun", "in": "query", "description": "All: validate without persisting", "schema": {"type": "string"}},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
]
_T = TypeVar("_T")
_CACHE: dict[tuple[str, str], tuple[tuple[Any, ...], list[ResourceType], Any]] = {}
_CACHE_LOCK = threading.Lock()
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def _type(value: Any) -> Any:
    if isinstance(value, list):
        kept = [t for t in value if t != "null"]
        return kept[0] if len(kept) == 1 else kept
    return value


def _convert(node: Any) -> Any:
    """One JSON-Schema node (kubernetes-json-schema form) back to its OpenAPI v3 form."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = V3_PREFIX + value.rsplit("/", 1)[-1]
        elif key == "type" and isinstance(value, (str, list)):
            out[key] = _type(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value)
        elif key in ("oneOf", "anyOf", "allOf") and isinstance(value, list):
            out[key] = [_convert(sub) for sub in value]
        else:
            out[key] = value
    if "$ref" in out and len(out) > 1:  # a reference with its own description: OpenAPI v3 wraps it in allOf
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


@functools.cache
def builtin_definitions() -> dict[str, dict[str, Any]]:
    """The upstream definitions of Kubernetes 1.32, in OpenAPI v3 form, keyed by their canonical names."""
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"{KUBERNETES_VERSION}-local"
    raw: dict[str, Any] = json.loads((folder / "_definitions.json").read_text())["$defs"]
    defs = {name: _convert(schema) for name, schema in raw.items()}
    for name, fmt in ((_INT_OR_STRING, "int-or-string"), (_QUANTITY, None)):
        described = {"description": raw[name].get("description", ""), "type": "string"}
        defs[name] = {**described, "format": fmt} if fmt else described
    for schema in defs.values():
        if schema.get("x-kubernetes-group-version-kind"):
            for prop in ("apiVersion", "kind"):
                (schema.get("properties") or {}).get(prop, {}).pop("enum", None)
    return defs


def _cached(name: str, arg: str, types: list[ResourceType], build: Callable[[], _T]) -> _T:
    """A document is rebuilt only when the served types change (a CRD is added, changed or removed)."""
    fingerprint = tuple((t.key, id(t), id(t.schema)) for t in types)
    with _CACHE_LOCK:
        hit = _CACHE.get((name, arg))
        if hit is not None and hit[0] == fingerprint:
            value: _T = hit[2]
            return value
    value = build()
    with _CACHE_LOCK:
        _CACHE[(name, arg)] = (fingerprint, types, value)  # the types stay referenced: their ids stay theirs
    return value


def _gvk(rtype: ResourceType) -> dict[str, str]:
    return {"group": rtype.group, "kind": rtype.kind, "version": rtype.version}


def schema_name(rtype: ResourceType) -> str:
    """The name of a kind's schema: the upstream one for built-ins, reversed group for CRDs (as the API server)."""
    if rtype.schema is None:
        for name, schema in builtin_definitions().items():
            if _gvk(rtype) in (schema.get("x-kubernetes-group-version-kind") or []):
                return name
    reversed_group = ".".join(reversed(rtype.group.split("."))) if rtype.group else "core"
    return f"{reversed_group}.{rtype.version}.{rtype.kind}"


def _crd_schema(rtype: ResourceType) -> dict[str, Any]:
    schema = copy.deepcopy(rtype.schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    props = schema.setdefault("properties", {})
    props["metadata"] = {
        "allOf": [{"$ref": V3_PREFIX + OBJECT_META}],
        "description": "Standard object's metadata.",
    }
    props.setdefault("apiVersion", {"type": "string"}).setdefault("description", "the schema version of the object")
    props.setdefault("kind", {"type": "string"}).setdefault("description", "the REST resource of the object")
    schema["x-kubernetes-group-version-kind"] = [_gvk(rtype)]
    return schema


def kind_schemas(rtype: ResourceType) -> dict[str, dict[str, Any]]:
    """The schema(s) describing one resource type, by name (a CRD's own; a built-in's upstream definition)."""
    name = schema_name(rtype)
    if rtype.schema is not None:
        return {name: _crd_schema(rtype)}
    defs = builtin_definitions()
    if name in defs:
        return {name: defs[name]}
    return {name: {"type": "object", "x-kubernetes-preserve-unknown-fields": True, **_gvk_ext(rtype)}}


def _gvk_ext(rtype: ResourceType) -> dict[str, Any]:
    return {"x-kubernetes-group-version-kind": [_gvk(rtype)]}


def _closure(schemas: dict[str, Any]) -> dict[str, Any]:
    """The schemas plus every built-in definition they reference, transitively."""
    defs = builtin_definitions()
    out = dict(schemas)
    pending = [json.dumps(s) for s in schemas.values()]
    while pending:
        text = pending.pop()
        for piece in text.split(f'"{V3_PREFIX}')[1:]:
            name = piece.split('"', 1)[0]
            if name not in out and name in defs:
                out[name] = defs[name]
                pending.append(json.dumps(defs[name]))
    return out


def _operation(rtype: ResourceType, action: str, ref: str, writes: bool) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{action}{rtype.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rtype),
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": V3_PREFIX + ref}}}}
        },
    }
    if writes:
        op["parameters"] = copy.deepcopy(_WRITE_PARAMS)
    return op


def _paths(rtype: ResourceType) -> dict[str, Any]:
    prefix = f"/apis/{rtype.group}/{rtype.version}" if rtype.group else f"/api/{rtype.version}"
    scope = f"{prefix}/namespaces/{{namespace}}" if rtype.namespaced else prefix
    ref = schema_name(rtype)
    collection = {
        "get": _operation(rtype, "list", ref, False),
        "post": _operation(rtype, "post", ref, True),
        "delete": _operation(rtype, "deletecollection", STATUS, False),
    }
    item = {
        "get": _operation(rtype, "get", ref, False),
        "put": _operation(rtype, "put", ref, True),
        "patch": _operation(rtype, "patch", ref, True),
        "delete": _operation(rtype, "delete", STATUS, False),
    }
    paths = {f"{scope}/{rtype.plural}": collection, f"{scope}/{rtype.plural}/{{name}}": item}
    for sub in rtype.subresources:
        if sub == "status":
            paths[f"{scope}/{rtype.plural}/{{name}}/status"] = {
                "get": _operation(rtype, "get", ref, False),
                "put": _operation(rtype, "put", ref, True),
                "patch": _operation(rtype, "patch", ref, True),
            }
    return paths


def group_version_path(rtype: ResourceType) -> str:
    """The key of a group-version in the v3 index: `api/v1` or `apis/<group>/<version>`."""
    return f"apis/{rtype.group}/{rtype.version}" if rtype.group else f"api/{rtype.version}"


def v3_document(types: list[ResourceType], gv_path: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document of one group-version, or None when nothing is served there."""
    return _cached("v3", gv_path, types, lambda: _v3_document(types, gv_path))


def _v3_document(types: list[ResourceType], gv_path: str) -> dict[str, Any] | None:
    chosen = [t for t in types if group_version_path(t) == gv_path]
    if not chosen:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {STATUS: builtin_definitions()[STATUS]}
    for rtype in sorted(chosen, key=lambda t: t.plural):
        paths.update(_paths(rtype))
        schemas.update(kind_schemas(rtype))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": dict(sorted(_closure(schemas).items()))},
    }


def document_hash(document: dict[str, Any]) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest().upper()


def v3_index(types: list[ResourceType]) -> dict[str, Any]:
    """`/openapi/v3`: every group-version with the URL (and content hash) of its document."""
    return _cached("v3-index", "", types, lambda: _v3_index(types))


def _v3_index(types: list[ResourceType]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for gv_path in sorted({group_version_path(t) for t in types}):
        document = v3_document(types, gv_path)
        assert document is not None
        paths[gv_path] = {"serverRelativeURL": f"/openapi/v3/{gv_path}?hash={document_hash(document)}"}
    return {"paths": paths}


def v2_document(types: list[ResourceType]) -> dict[str, Any]:
    """`/openapi/v2` (Swagger 2.0, JSON): every kind's schema under `definitions`, with the same paths."""
    return _cached("v2", "", types, lambda: _v2_document(types))


def _v2_document(types: list[ResourceType]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {STATUS: builtin_definitions()[STATUS]}
    for rtype in sorted(types, key=lambda t: (t.group, t.version, t.plural)):
        paths.update(_paths(rtype))
        schemas.update(kind_schemas(rtype))
    document = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "definitions": dict(sorted(_closure(schemas).items())),
    }
    text = json.dumps(document).replace(f'"{V3_PREFIX}', f'"{V2_PREFIX}')
    result: dict[str, Any] = json.loads(text)
    for path_item in result["paths"].values():
        for op in path_item.values():
            for param in op.get("parameters") or []:
                param["type"] = param.pop("schema", {}).get("type", "string")
            op["responses"] = {
                "200": {"description": "OK", "schema": op["responses"]["200"]["content"]["application/json"]["schema"]}
            }
    return result


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """A node with its `$ref` (or single-reference `allOf`) replaced by the referenced built-in definition."""
    defs = builtin_definitions()
    for _ in range(8):
        ref = schema.get("$ref")
        if ref is None and len(schema.get("allOf") or []) == 1:
            ref = schema["allOf"][0].get("$ref")
        if not isinstance(ref, str):
            return schema
        schema = defs.get(ref.rsplit("/", 1)[-1], {})
    return schema
