"""HTTP layer: kmock's KubernetesEmulator with its object handling replaced by the fidelity store."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp.web
import kmock

from stepscope_local.kube import errors, field_validation, openapi, protobuf
from stepscope_local.kube.identity import AuditLog
from stepscope_local.kube.resources import ALL_VERBS, ResourceType
from stepscope_local.kube.selectors import parse_field_selector, parse_label_selector
from stepscope_local.kube.store import Obj, Store
from stepscope_local.kube.table import table, wants_table

LogReader = Callable[[str, str, str | None], str | None]
_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "log": ["get"]}
logger = logging.getLogger(__name__)


def _json(body: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def _warned(response: aiohttp.web.Response, warnings: list[str]) -> aiohttp.web.Response:
    """Add the API server's `Warning: 299 - "..."` headers (field validation in Warn mode)."""
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response


class FidelityEmulator(kmock.KubernetesEmulator):
    """Serves discovery, CRUD, patch, watch and Table output from a :class:`Store`."""

    def __init__(self, store: Store, log_reader: LogReader | None = None) -> None:
        super().__init__()
        self.store = store
        self.log_reader = log_reader
        self.audit: AuditLog | None = None  # who made which request (identity.py); set by EmulatorServer
        self._watch_queues: set[asyncio.Queue[tuple[str, Obj, int] | None]] = set()
        self.unavailable = False  # an outage: every request answered 503 (EmulatorServer.set_unavailable)

    def close_watches(self) -> None:
        """End every open watch stream (called on the server's loop before it stops)."""
        for queue in list(self._watch_queues):
            queue.put_nowait(None)

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Entry point of kmock's Server: every request goes to the fidelity layer.

        kmock's own request parser is bypassed: it cannot parse paths such as `/api/v1/namespaces`, and it keeps
        every request in memory, which a long-running demo cannot afford."""
        body = await raw.read()
        logger.debug("%s %s", raw.method, raw.path_qs)
        if self.unavailable:
            return _json(errors.ApiError(503, "ServiceUnavailable", "the API server is unavailable").status(), 503)
        data: Any = None
        content_type = raw.headers.get("Content-Type", "json")
        try:
            if body and "protobuf" in content_type:  # kubectl create secret|configmap|namespace|serviceaccount
                data = protobuf.decode_object(body)
            elif body and "json" in content_type:
                try:
                    data = json.loads(body)
                except ValueError:
                    raise errors.bad_request("the request body is not valid JSON") from None
            return await self._dispatch(raw, data)
        except errors.ApiError as exc:
            return _json(exc.status(), exc.code)
        except Exception as exc:
            logger.exception("emulator request %s %s failed", raw.method, raw.path_qs)
            return _json(errors.ApiError(500, "InternalError", repr(exc)).status(), 500)

    # ---- routing --------------------------------------------------------------------------------------------------
    async def _dispatch(self, raw: aiohttp.web.BaseRequest, data: Any) -> aiohttp.web.StreamResponse:
        parts = [p for p in raw.path.split("/") if p]
        if not parts:
            return _json({"paths": self._root_paths()})
        if parts[0] in ("healthz", "livez", "readyz"):
            return aiohttp.web.Response(text="ok")
        if parts == ["version"]:
            return _json(self._version())
        if parts[0] == "openapi":  # built off the loop: the first build reads Kubernetes' definitions
            return await asyncio.to_thread(self._openapi, raw, parts[1:])
        if parts[0] == "api":
            if len(parts) == 1:
                host = raw.host
                return _json(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
                    }
                )
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return _json(self._group_list())
            if len(parts) == 2:
                return _json(self._group(parts[1]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")
        if not rest:
            return _json(self._resource_list(group, version))
        return await self._resource_request(raw, data, group, version, rest)

    def _locate(
        self, raw: aiohttp.web.BaseRequest, group: str, version: str, rest: list[str]
    ) -> tuple[ResourceType, str | None, str | None, str | None]:
        """(type, namespace, name, subresource) of a resource path; the request is recorded for the audit."""
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            with contextlib.suppress(errors.ApiError):
                if self.store.type_for(group, version, rest[2]).namespaced:
                    namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")
        rtype = self.store.type_for(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rtype.subresources:
            raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")
        if self.audit is not None:
            auth = raw.headers.get("Authorization")
            self.audit.record(auth, raw.method, raw.query, group, rtype.plural, sub, namespace, name)
        return rtype, namespace, name, sub

    async def _resource_request(
        self, raw: aiohttp.web.BaseRequest, data: Any, group: str, version: str, rest: list[str]
    ) -> aiohttp.web.StreamResponse:
        rtype, namespace, name, sub = self._locate(raw, group, version, rest)
        query = raw.query
        method = raw.method.upper()
        accept = raw.headers.get("Accept", "")
        if method == "GET" and query.get("watch", "").lower() in ("true", "1"):
            fields = query.get("fieldSelector", "")
            if name:
                fields = ",".join(f for f in (fields, f"metadata.name={name}") if f)
            return await self._watch(raw, rtype, namespace, query.get("labelSelector"), fields, accept)
        # server-side field validation of the body (Strict raises here, Warn answers with Warning headers)
        warnings = field_validation.check(rtype, data, query.get("fieldValidation")) if sub is None else []
        if name is None:
            return self._collection_request(method, rtype, namespace, data, query, accept, warnings=warnings)
        return await self._object_request(raw, data, rtype, namespace, name, sub, warnings=warnings)

    def _collection_request(  # noqa: PLR0917
        self,
        method: str,
        rtype: ResourceType,
        namespace: str | None,
        data: Any,
        query: Mapping[str, str],
        accept: str,
        *,
        warnings: list[str],
    ) -> aiohttp.web.StreamResponse:
        """GET (list or Table), POST (create) and DELETE (deletecollection) on a collection."""
        if method == "GET" and wants_table(accept):
            items, rv = self.store.list_objects(
                rtype, namespace, query.get("labelSelector"), query.get("fieldSelector")
            )
            return _json(table(rtype, items, rv, query.get("includeObject", "PartialObjectMetadata")))
        if method == "GET":
            kind = {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version}
            return self.store.list_rendered(  # serialised under the store's lock instead of copied
                rtype,
                namespace,
                query.get("labelSelector"),
                query.get("fieldSelector"),
                lambda items, rv: _json({**kind, "metadata": {"resourceVersion": rv}, "items": items}),
            )
        if method == "POST":
            if not isinstance(data, dict):
                raise errors.bad_request("the request body must be a JSON object")
            created = self.store.create(rtype, namespace, data, dry_run=bool(query.get("dryRun")))
            return _warned(_json(created, 201), warnings)
        if method == "DELETE":
            items, rv = self.store.list_objects(
                rtype, namespace, query.get("labelSelector"), query.get("fieldSelector")
            )
            deleted = [self.store.delete(rtype, namespace, o["metadata"]["name"]) for o in items]
            return _json(
                {
                    "kind": f"{rtype.kind}List",
                    "apiVersion": rtype.api_version,
                    "metadata": {"resourceVersion": self.store.current_rv()},
                    "items": deleted,
                }
            )
        raise errors.ApiError(405, "MethodNotAllowed", f"{method} is not supported on collections")

    async def _object_request(  # noqa: PLR0917
        self,
        raw: aiohttp.web.BaseRequest,
        data: Any,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        sub: str | None,
        *,
        warnings: list[str],
    ) -> aiohttp.web.StreamResponse:
        """GET (object, Table or pod log), PUT, PATCH and DELETE on one object or its subresource."""
        query = raw.query
        method = raw.method.upper()
        if method == "GET" and sub == "log":
            return self._log(namespace or "default", name, query.get("container"))
        if method == "GET":
            obj = self.store.get(rtype, namespace, name)
            if wants_table(raw.headers.get("Accept", "")):
                return _json(
                    table(
                        rtype,
                        [obj],
                        obj["metadata"]["resourceVersion"],
                        query.get("includeObject", "PartialObjectMetadata"),
                    )
                )
            return _json(obj)
        if method == "PUT":
            if not isinstance(data, dict):
                raise errors.bad_request("the request body must be a JSON object")
            return _warned(_json(self.store.replace(rtype, namespace, name, data, sub)), warnings)
        if method == "PATCH":
            body = data if data is not None else json.loads(await raw.text() or "null")
            patched = self.store.patch(rtype, namespace, name, raw.headers.get("Content-Type", ""), body, sub)
            return _warned(_json(patched), warnings)
        if method == "DELETE":
            options = data if isinstance(data, dict) else {}
            policy = query.get("propagationPolicy") or options.get("propagationPolicy")
            return _json(self.store.delete(rtype, namespace, name, policy))
        raise errors.ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    # ---- watch ----------------------------------------------------------------------------------------------------
    async def _watch(  # noqa: PLR0917
        self,
        raw: aiohttp.web.BaseRequest,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        accept: str,
    ) -> aiohttp.web.StreamResponse:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        rv_text = raw.query.get("resourceVersion", "")
        since = int(rv_text) if rv_text.isdigit() and rv_text != "0" else None
        timeout_text = raw.query.get("timeoutSeconds", "")
        deadline = time.monotonic() + float(timeout_text) if timeout_text else None
        as_table = wants_table(accept)
        include = raw.query.get("includeObject", "PartialObjectMetadata")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Obj, int] | None] = asyncio.Queue()

        def on_event(kind: str, obj: Obj, rv: int) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, obj, rv))

        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        try:
            initial, unsubscribe = self.store.subscribe(rtype, namespace, since, on_event)
        except errors.ApiError as exc:
            await response.prepare(raw)
            await response.write(json.dumps({"type": "ERROR", "object": exc.status()}).encode() + b"\n")
            await response.write_eof()
            return response
        self._watch_queues.add(queue)
        first = True
        try:
            await response.prepare(raw)
            for event in initial:
                queue.put_nowait(event)
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    item: tuple[str, Obj, int] | None = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError:
                    break
                if item is None:
                    break
                kind, obj, rv = item
                if not (labels(obj["metadata"].get("labels") or {}) and fields(obj)):
                    continue
                payload: Any = obj
                if as_table:
                    payload = table(rtype, [obj], str(rv), include)
                    if not first:
                        payload["columnDefinitions"] = []
                first = False
                await response.write(json.dumps({"type": kind, "object": payload}).encode() + b"\n")
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            unsubscribe()
            self._watch_queues.discard(queue)
        return response

    # ---- OpenAPI --------------------------------------------------------------------------------------------------
    def _openapi(self, raw: aiohttp.web.BaseRequest, rest: list[str]) -> aiohttp.web.StreamResponse:
        """`/openapi/v2` (JSON) and `/openapi/v3[/<group-version>]`, for kubectl's validation and explain."""
        types = self.store.types()
        if rest == ["v2"]:
            if "protobuf" in raw.headers.get("Accept", "") and "json" not in raw.headers.get("Accept", ""):
                raise errors.ApiError(406, "NotAcceptable", "the local emulator serves OpenAPI v2 as JSON only")
            return _json(openapi.v2_document(types))
        if rest == ["v3"]:
            return _json(openapi.v3_index(types))
        if len(rest) > 1 and rest[0] == "v3":
            document = openapi.v3_document(types, "/".join(rest[1:]))
            if document is not None:
                return _json(document)
        raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")

    # ---- logs -----------------------------------------------------------------------------------------------------
    def _log(self, namespace: str, name: str, container: str | None) -> aiohttp.web.StreamResponse:
        self.store.get(self.store.type_for("", "v1", "pods"), namespace, name)
        text = self.log_reader(namespace, name, container) if self.log_reader else None
        if text is None:
            raise errors.bad_request(f'container logs of pod "{name}" are not available')
        return aiohttp.web.Response(text=text, content_type="text/plain")

    # ---- discovery ------------------------------------------------------------------------------------------------
    def _version(self) -> dict[str, str]:
        return {
            "major": "1",
            "minor": "32",
            "gitVersion": "v1.32.0-stepscope-emulator",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.23",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    def _root_paths(self) -> list[str]:
        paths = {"/api", "/api/v1", "/apis", "/version", "/healthz"}
        for rtype in self.store.types():
            if rtype.group:
                paths.add(f"/apis/{rtype.group}")
                paths.add(f"/apis/{rtype.group}/{rtype.version}")
        return sorted(paths)

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for rtype in self.store.types():
            if rtype.group and rtype.version not in groups.setdefault(rtype.group, []):
                groups[rtype.group].append(rtype.version)
        return groups

    def _group_entry(self, group: str, versions: list[str]) -> dict[str, Any]:
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def _group_list(self) -> dict[str, Any]:
        groups = [self._group_entry(g, vs) for g, vs in sorted(self._groups().items())]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _group(self, group: str) -> dict[str, Any]:
        versions = self._groups().get(group)
        if not versions:
            raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({group})")
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_entry(group, versions)}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for rtype in self.store.types():
            if rtype.group != group or rtype.version != version:
                continue
            entry: dict[str, Any] = {
                "name": rtype.plural,
                "singularName": rtype.singular,
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": list(ALL_VERBS),
            }
            if rtype.short_names:
                entry["shortNames"] = list(rtype.short_names)
            if rtype.categories:
                entry["categories"] = list(rtype.categories)
            resources.append(entry)
            for sub in rtype.subresources:
                resources.append(
                    {
                        "name": f"{rtype.plural}/{sub}",
                        "singularName": "",
                        "namespaced": rtype.namespaced,
                        "kind": rtype.kind,
                        "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
                    }
                )
        if not resources:
            gv = f"{group}/{version}" if group else version
            raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({gv})")
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
