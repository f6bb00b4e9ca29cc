"""The operator's Kubernetes API calls (pods, Jobs, sessions), through the official client in worker threads."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from stepscope_contract.constants import GROUP, PLURAL, VERSION


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

    async def get_session(self, namespace: str, name: str) -> dict[str, Any] | None:
        def call() -> dict[str, Any] | None:
            try:
                obj: dict[str, Any] = self._custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
                return obj
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        return await asyncio.to_thread(call)

    async def get_custom(self, api: tuple[str, str, str], namespace: str, name: str) -> dict[str, Any] | None:
        """A namespaced custom object by (group, version, plural); None when it (or its kind) does not exist."""
        group, version, plural = api

        def call() -> dict[str, Any] | None:
            try:
                obj: dict[str, Any] = self._custom.get_namespaced_custom_object(group, version, namespace, plural, name)
                return obj
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        return await asyncio.to_thread(call)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        def call() -> dict[str, Any] | None:
            try:
                job: dict[str, Any] = self._json(
                    self._batch.read_namespaced_job(name, namespace, _preload_content=False)
                )
                return job
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

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
