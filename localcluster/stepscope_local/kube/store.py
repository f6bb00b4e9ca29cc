"""The object store behind the emulator: apiserver semantics over an in-memory dict, thread-safe.

It gives what kopf and kubectl rely on: uid, creationTimestamp, a global monotonic resourceVersion, generation bumped
on spec changes only, 409 on duplicates and stale writes, status-subresource isolation, finalizers, ownerReference
garbage collection, CRD registration with schema validation and defaults, and an event history for resumable watches.
"""

from __future__ import annotations

import base64
import builtins
import copy
import datetime as dt
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from stepscope_local.kube import errors
from stepscope_local.kube.patching import apply_patch
from stepscope_local.kube.resources import BUILTINS, CRD_TYPE, ResourceType, types_from_crd
from stepscope_local.kube.selectors import parse_field_selector, parse_label_selector
from stepscope_local.kube.validation import apply_defaults, prune, validation_errors

Obj = dict[str, Any]
EventCallback = Callable[[str, Obj, int], None]
_R = TypeVar("_R")
HISTORY = 20_000
_IMMUTABLE_META = ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp", "generation")


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Watcher:
    group_plural: tuple[str, str]
    namespace: str | None
    callback: EventCallback


@dataclass(frozen=True)
class _Event:
    rv: int
    group_plural: tuple[str, str]
    type: str
    obj: Obj


def _ns_key(rtype: ResourceType, namespace: str | None) -> str:
    return (namespace or "default") if rtype.namespaced else ""


def _content(obj: Obj) -> Obj:
    """What counts for `generation`: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Store:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._rv = 0
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._history: deque[_Event] = deque(maxlen=HISTORY)
        self._watchers: list[_Watcher] = []
        for rtype in BUILTINS:
            self._register(rtype)
        for ns in ("default", "kube-system"):
            self.create(self.type_for("", "v1", "namespaces"), None, {"metadata": {"name": ns}})

    # ---- resource types -------------------------------------------------------------------------------------------
    def _register(self, rtype: ResourceType) -> None:
        self._types[rtype.key] = rtype
        self._objects.setdefault((rtype.group, rtype.plural), {})

    def types(self) -> builtins.list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def type_for(self, group: str, version: str, plural: str) -> ResourceType:
        with self._lock:
            rtype = self._types.get((group, version, plural))
        if rtype is None:
            gv = f"{group}/{version}" if group else version
            raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({gv}, {plural})")
        return rtype

    def type_for_kind(self, api_version: str, kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")
        with self._lock:
            for rtype in self._types.values():
                if rtype.group == group and rtype.version == version and rtype.kind == kind:
                    return rtype
        raise errors.ApiError(404, "NotFound", f'no matches for kind "{kind}" in version "{api_version}"')

    def _on_crd_change(self, crd: Obj, removed: bool) -> None:
        spec = crd.get("spec") or {}
        group = str(spec.get("group", ""))
        plural = str((spec.get("names") or {}).get("plural", ""))
        for type_key in [k for k in self._types if k[0] == group and k[2] == plural]:
            del self._types[type_key]
        if removed:
            for obj_key in list(self._objects.get((group, plural), {})):
                self._remove(ResourceType(group, "", plural, ""), obj_key, cascade=False)
            return
        for rtype in types_from_crd(crd):
            self._register(rtype)

    # ---- bookkeeping ----------------------------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _emit(self, rtype: ResourceType, kind: str, obj: Obj) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        event = _Event(rv, (rtype.group, rtype.plural), kind, copy.deepcopy(obj))
        self._history.append(event)
        ns = obj["metadata"].get("namespace")
        for watcher in list(self._watchers):
            if watcher.group_plural == event.group_plural and watcher.namespace in (None, ns):
                watcher.callback(kind, event.obj, rv)

    def current_rv(self) -> str:
        with self._lock:
            return str(self._rv)

    # ---- reads ----------------------------------------------------------------------------------------------------
    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        with self._lock:
            obj = self._objects[(rtype.group, rtype.plural)].get((_ns_key(rtype, namespace), name))
            if obj is None:
                raise errors.not_found(rtype.plural if not rtype.group else f"{rtype.plural}.{rtype.group}", name)
            return copy.deepcopy(obj)

    def list_objects(
        self,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[Obj], str]:
        return self.list_rendered(
            rtype, namespace, label_selector, field_selector, lambda items, rv: ([copy.deepcopy(o) for o in items], rv)
        )

    def list_rendered(
        self,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        render: Callable[[builtins.list[Obj], str], _R],
    ) -> _R:
        """`render(items, resourceVersion)` under the store's lock, over the stored objects themselves, oldest first:
        for a caller that only serialises them (copying 10,000 pods took 0.45 s of a list's 0.87 s). `render` must
        not keep or change them."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        with self._lock:
            items = [
                obj
                for (ns, _), obj in self._objects[(rtype.group, rtype.plural)].items()
                if (namespace is None or not rtype.namespaced or ns == namespace)
                and labels(obj["metadata"].get("labels") or {})
                and fields(obj)
            ]
            items.sort(key=lambda o: int(o["metadata"]["resourceVersion"]))
            return render(items, str(self._rv))

    def subscribe(
        self, rtype: ResourceType, namespace: str | None, since_rv: int | None, callback: EventCallback
    ) -> tuple[builtins.list[tuple[str, Obj, int]], Callable[[], None]]:
        """Atomically: the events to send first (a snapshot as ADDED, or the history after `since_rv`), and a
        registration for what follows. `callback` runs under the store lock: it must not block."""
        gp = (rtype.group, rtype.plural)
        with self._lock:
            initial: builtins.list[tuple[str, Obj, int]] = []
            if since_rv is None:
                for (ns, _), obj in self._objects[gp].items():
                    if namespace is None or not rtype.namespaced or ns == namespace:
                        initial.append(("ADDED", copy.deepcopy(obj), int(obj["metadata"]["resourceVersion"])))
                initial.sort(key=lambda e: e[2])
            elif since_rv < self._rv:
                oldest = self._history[0].rv if self._history else self._rv + 1
                if since_rv < oldest - 1:
                    raise errors.gone(f"too old resource version: {since_rv} ({oldest - 1})")
                for ev in self._history:
                    if ev.rv > since_rv and ev.group_plural == gp:
                        ns = ev.obj["metadata"].get("namespace")
                        if namespace is None or ns == namespace:
                            initial.append((ev.type, ev.obj, ev.rv))
            watcher = _Watcher(gp, namespace if rtype.namespaced else None, callback)
            self._watchers.append(watcher)

        def unsubscribe() -> None:
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)

        return initial, unsubscribe

    # ---- writes ---------------------------------------------------------------------------------------------------
    def _check_schema(self, rtype: ResourceType, obj: Obj, old: Obj | None = None) -> None:
        if rtype.kind == "Secret" and rtype.group == "":
            obj.setdefault("type", "Opaque")  # the apiserver's default
            if isinstance(obj.get("stringData"), dict):
                data = obj.setdefault("data", {})  # the apiserver folds stringData into data
                for key, value in obj.pop("stringData").items():
                    data[key] = base64.b64encode(str(value).encode()).decode()
        if rtype.schema:
            pruned = prune(rtype.schema, obj)
            if pruned is not obj:  # a schema that preserves unknown fields keeps the very same object
                obj.clear()
                obj.update(pruned)
            apply_defaults(rtype.schema, obj)
            problems = validation_errors(rtype.schema, obj, old)
            if problems:
                name = obj.get("metadata", {}).get("name", "")
                raise errors.invalid(rtype.qualified, name, problems)

    def create(
        self, rtype: ResourceType, namespace: str | None, body: Obj, *, keep_status: bool = False, dry_run: bool = False
    ) -> Obj:
        """Create an object; with `dry_run`, everything but storing it (validation, defaults, name generation)."""
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            else:
                raise errors.invalid(rtype.qualified, "", [("metadata.name", "Required value: name or generateName")])
        if rtype.namespaced:
            body_ns = meta.get("namespace")
            if namespace and body_ns and body_ns != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent")
            meta["namespace"] = namespace or body_ns or "default"
        else:
            meta.pop("namespace", None)
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        if not keep_status:
            if rtype.kind == "Pod" and rtype.group == "":
                obj["status"] = {"phase": "Pending"}
            elif rtype.has_status:
                obj.pop("status", None)
        if rtype is CRD_TYPE or rtype.key == CRD_TYPE.key:
            types_from_crd(obj)  # raises on malformed CRDs before anything is stored
            names = (obj.get("spec") or {}).get("names") or {}
            obj["status"] = {
                "conditions": [
                    {
                        "type": "NamesAccepted",
                        "status": "True",
                        "reason": "NoConflicts",
                        "lastTransitionTime": now_rfc3339(),
                    },
                    {
                        "type": "Established",
                        "status": "True",
                        "reason": "InitialNamesAccepted",
                        "lastTransitionTime": now_rfc3339(),
                    },
                ],
                "acceptedNames": names,
                "storedVersions": [
                    v["name"] for v in (obj.get("spec") or {}).get("versions") or [] if v.get("storage")
                ],
            }
        self._check_schema(rtype, obj)
        with self._lock:
            bucket = self._objects[(rtype.group, rtype.plural)]
            key = (_ns_key(rtype, meta.get("namespace")), meta["name"])
            if key in bucket:
                raise errors.already_exists(
                    rtype.plural if not rtype.group else f"{rtype.plural}.{rtype.group}", key[1]
                )
            for drop in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
                meta.pop(drop, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            if dry_run:
                return copy.deepcopy(obj)
            meta["resourceVersion"] = str(self._next_rv())
            bucket[key] = obj
            if rtype.key == CRD_TYPE.key:
                self._on_crd_change(obj, removed=False)
            self._emit(rtype, "ADDED", obj)
            return copy.deepcopy(obj)

    def replace(
        self, rtype: ResourceType, namespace: str | None, name: str, body: Obj, subresource: str | None = None
    ) -> Obj:
        with self._lock:
            old = self._stored(rtype, namespace, name)
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise self._stale(rtype, name)
            return self._update(rtype, old, copy.deepcopy(body), subresource)

    def patch(  # noqa: PLR0917
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        patch: Any,
        subresource: str | None = None,
    ) -> Obj:
        with self._lock:
            old = self._stored(rtype, namespace, name)
            candidate = apply_patch(old, content_type, patch)
            sent_rv = (candidate.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise self._stale(rtype, name)
            return self._update(rtype, old, candidate, subresource)

    def _stale(self, rtype: ResourceType, name: str) -> errors.ApiError:
        what = rtype.plural if not rtype.group else f"{rtype.plural}.{rtype.group}"
        return errors.conflict(
            what, name, "the object has been modified; please apply your changes to the latest version and try again"
        )

    def _stored(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self._objects[(rtype.group, rtype.plural)].get((_ns_key(rtype, namespace), name))
        if obj is None:
            raise errors.not_found(rtype.plural if not rtype.group else f"{rtype.plural}.{rtype.group}", name)
        return obj

    def _update(self, rtype: ResourceType, old: Obj, candidate: Obj, subresource: str | None) -> Obj:
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in candidate:
                new["status"] = candidate["status"]
            else:
                new.pop("status", None)
        elif subresource:
            raise errors.ApiError(405, "MethodNotAllowed", f"subresource {subresource} does not accept writes")
        else:
            new = candidate
            if rtype.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
        meta = new.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        for key in _IMMUTABLE_META:
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        new["apiVersion"] = old["apiVersion"]
        new["kind"] = old["kind"]
        self._check_schema(rtype, new, old)
        if new == old:
            return copy.deepcopy(old)
        if _content(new) != _content(old):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = str(self._next_rv())
        obj_key = (_ns_key(rtype, meta.get("namespace")), str(meta["name"]))
        self._objects[(rtype.group, rtype.plural)][obj_key] = new
        if rtype.key == CRD_TYPE.key:
            self._on_crd_change(new, removed=False)
        self._emit(rtype, "MODIFIED", new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(rtype, obj_key)
        return copy.deepcopy(new)

    def delete(self, rtype: ResourceType, namespace: str | None, name: str, propagation: str | None = None) -> Obj:
        with self._lock:
            obj = self._stored(rtype, namespace, name)
            obj_key = (_ns_key(rtype, namespace), name)
            if obj["metadata"].get("finalizers"):
                if not obj["metadata"].get("deletionTimestamp"):
                    obj["metadata"]["deletionTimestamp"] = now_rfc3339()
                    obj["metadata"]["deletionGracePeriodSeconds"] = 0
                    obj["metadata"]["resourceVersion"] = str(self._next_rv())
                    self._emit(rtype, "MODIFIED", obj)
                return copy.deepcopy(obj)
            return self._remove(rtype, obj_key, cascade=propagation != "Orphan")

    def _remove(self, rtype: ResourceType, key: tuple[str, str], cascade: bool = True) -> Obj:
        bucket = self._objects[(rtype.group, rtype.plural)]
        obj = bucket.pop(key, None)
        if obj is None:
            return {}
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        full = self._types.get(rtype.key, rtype)
        self._emit(full, "DELETED", obj)
        if rtype.key == CRD_TYPE.key:
            self._on_crd_change(obj, removed=True)
        if cascade:
            self._collect_dependents(obj["metadata"]["uid"])
        return copy.deepcopy(obj)

    def _collect_dependents(self, owner_uid: str) -> None:
        """Background garbage collection: delete every object that names the removed owner."""
        for rtype in list(self._types.values()):
            bucket = self._objects.get((rtype.group, rtype.plural), {})
            for (ns, name), obj in list(bucket.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == owner_uid for r in refs) and (ns, name) in bucket:
                    self.delete(rtype, ns or None, name)

    # ---- convenience ----------------------------------------------------------------------------------------------
    def apply(self, body: Obj) -> Obj:
        """Create, or replace everything (status included) of an existing object: the test and harness helper."""
        rtype = self.type_for_kind(body["apiVersion"], body["kind"])
        meta = body.get("metadata") or {}
        ns = meta.get("namespace") if rtype.namespaced else None
        with self._lock:
            try:
                old = self._stored(rtype, ns, meta.get("name", ""))
            except errors.ApiError:
                return self.create(rtype, ns, body, keep_status=True)
            candidate = copy.deepcopy(body)
            candidate.setdefault("metadata", {}).pop("resourceVersion", None)
            result = self._update(rtype, old, candidate, None)
            if rtype.has_status and "status" in body:
                result = self._update(rtype, self._stored(rtype, ns, meta["name"]), copy.deepcopy(body), "status")
            return result

    def all_objects(self, rtypes: Iterable[ResourceType]) -> builtins.list[Obj]:
        with self._lock:
            return [copy.deepcopy(o) for r in rtypes for o in self._objects[(r.group, r.plural)].values()]
