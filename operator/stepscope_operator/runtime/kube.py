"""The operator's Kubernetes API calls (pods, Jobs, sessions), through the official client in worker threads."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from stepscope_contract.constants import GROUP, PLURAL, VERSION


def _none_if_missing(read: Callable[[], Any]) -> dict[str, Any] | None:
    """The object `read` returns, or None when the API server says 404."""
    try:
        obj: dict[str, Any] = read()
        return obj
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


class Kube:
    def __init__(self, kubeconfig: str | None = None) -> None:
        path = kubeconfig or os.environ.get("KUBECONFIG")
        cfg = client.Configuration()
        if path:
            config.load_kube_config(config_file=path, client_configuration=cfg)
        else:
            config.load_incluster_config(client_configuration=cfg)
        cfg.connection_pool_maxsize = 16
        self._api = client.ApiClient(cfg)
        self._core = client.CoreV1Api(self._api)
        self._batch = client.BatchV1Api(self._api)
        self._custom = client.CustomObjectsApi(self._api)

    @staticmethod
    def _json(response: Any) -> Any:
        return json.loads(response.data)

    async def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        def call() -> list[dict[str, Any]]:
            resp = self._core.list_namespaced_pod(namespace, label_selector=label_selector, _preload_content=False)
            items: list[dict[str, Any]] = self._json(resp).get("items") or []
            return items

        return await asyncio.to_thread(call)

    async def list_sessions(self, namespace: str) -> list[dict[str, Any]]:
        def call() -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = (
                self._custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL).get("items") or []
            )
            return items

        return await asyncio.to_thread(call)

    async def get_custom(self, api: tuple[str, str, str], namespace: str, name: str) -> dict[str, Any] | None:
        """A namespaced custom object by (group, version, plural); None when it (or its kind) does not exist."""
        group, version, plural = api

        def call() -> dict[str, Any] | None:
            return _none_if_missing(
                lambda: self._custom.get_namespaced_custom_object(group, version, namespace, plural, name)
            )

        return await asyncio.to_thread(call)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        def call() -> dict[str, Any] | None:
            return _none_if_missing(
                lambda: self._json(self._batch.read_namespaced_job(name, namespace, _preload_content=False))
            )

        return await asyncio.to_thread(call)

    async def create_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the Job; an existing one of that name (a retry after a restart) is returned as is."""

        def call() -> dict[str, Any]:
            try:
                job: dict[str, Any] = self._json(
                    self._batch.create_namespaced_job(namespace, body, _preload_content=False)
                )
                return job
            except ApiException as exc:
                if exc.status != 409:
                    raise
                existing: dict[str, Any] = self._json(
                    self._batch.read_namespaced_job(body["metadata"]["name"], namespace, _preload_content=False)
                )
                return existing

        return await asyncio.to_thread(call)

    def close(self) -> None:
        self._api.close()

    # -- what ProfileTriggers need: their sessions, listed by label, created and pruned ----------------------------

    async def list_sessions_selected(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        def call() -> list[dict[str, Any]]:
            listed = self._custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, label_selector=label_selector
            )
            items: list[dict[str, Any]] = listed.get("items") or []
            return items

        return await asyncio.to_thread(call)

    async def create_session(self, namespace: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """(the session, created); one of that name that exists already (a retry) is returned as is."""

        def call() -> tuple[dict[str, Any], bool]:
            try:
                obj: dict[str, Any] = self._custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, body
                )
                return obj, True
            except ApiException as exc:
                if exc.status != 409:
                    raise
                existing: dict[str, Any] = self._custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, body["metadata"]["name"]
                )
                return existing, False

        return await asyncio.to_thread(call)

    async def delete_session(self, namespace: str, name: str) -> bool:
        """Delete a session (its finalizer then runs); False when it was gone already."""

        def call() -> bool:
            try:
                self._custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
                return True
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise

        return await asyncio.to_thread(call)

    # -- what onboarding writes into a team's namespace (onboarding.py) ----------------------------------------------

    async def create_or_get(self, collection: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """(the object, created) for a POST to `collection`; one of that name that exists already is returned."""

        def request(method: str, path: str, data: Any = None) -> dict[str, Any]:
            response = self._api.call_api(
                path,
                method,
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=data,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
            )
            obj: dict[str, Any] = self._json(response)
            return obj

        def call() -> tuple[dict[str, Any], bool]:
            try:
                return request("POST", collection, body), True
            except ApiException as exc:
                if exc.status != 409:
                    raise
                return request("GET", f"{collection}/{body['metadata']['name']}"), False

        return await asyncio.to_thread(call)

    async def get_path(self, path: str) -> dict[str, Any]:
        """The object at the API path `path`."""

        def call() -> dict[str, Any]:
            response = self._api.call_api(
                path,
                "GET",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
            )
            obj: dict[str, Any] = self._json(response)
            return obj

        return await asyncio.to_thread(call)

    async def patch_json(self, path: str, ops: list[dict[str, Any]]) -> None:
        """A JSON Patch (RFC 6902) of the object at `path`."""
        await self._patch(path, ops, "application/json-patch+json")

    async def patch_merge(self, path: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch (RFC 7386) of the object at `path`."""
        await self._patch(path, patch, "application/merge-patch+json")

    async def _patch(self, path: str, body: Any, content_type: str) -> None:
        def call() -> None:
            self._api.call_api(
                path,
                "PATCH",
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
            )

        await asyncio.to_thread(call)
