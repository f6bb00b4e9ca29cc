"""`EmulatorServer`: the emulator on 127.0.0.1 (free port) in a background thread, with a kubeconfig file."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import kmock
import yaml

from stepscope_local.kube import errors
from stepscope_local.kube.handler import FidelityEmulator, LogReader
from stepscope_local.kube.identity import ADMIN_TOKEN, AuditLog, Identities
from stepscope_local.kube.store import Obj, Store


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def write_kubeconfig(path: Path, url: str, namespace: str = "default", token: str = ADMIN_TOKEN) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stepscope-local", "cluster": {"server": url}}],
        "users": [{"name": "stepscope-local", "user": {"token": token}}],
        "contexts": [
            {
                "name": "stepscope-local",
                "context": {"cluster": "stepscope-local", "user": "stepscope-local", "namespace": namespace},
            }
        ],
        "current-context": "stepscope-local",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class EmulatorServer:
    """Context manager; the helpers call the store directly and are thread-safe."""

    def __init__(self, workdir: Path | None = None, log_reader: LogReader | None = None) -> None:
        self.store = Store()
        self._emulator = FidelityEmulator(self.store, log_reader)
        self.identities = Identities()
        self.audit = AuditLog(self.identities)  # every resource request with the identity of its token
        self._emulator.audit = self.audit
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="stepscope-kube-")
            workdir = Path(self._tmp.name)
        self._workdir = workdir
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._port = 0
        self.kubeconfig_path = workdir / "kubeconfig"
        self._written: set[Path] = set()  # the identity kubeconfigs written for this server's port
        self._written_lock = threading.Lock()

    @property
    def log_reader(self) -> LogReader | None:
        return self._emulator.log_reader

    @log_reader.setter
    def log_reader(self, reader: LogReader | None) -> None:
        self._emulator.log_reader = reader

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # ---- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> EmulatorServer:
        self._thread = threading.Thread(target=self._run, name="kube-emulator", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError("the Kubernetes API emulator failed to start") from self._error
        if not self._port:
            raise RuntimeError("the Kubernetes API emulator did not start within 30 s")
        self._workdir.mkdir(parents=True, exist_ok=True)
        with self._written_lock:
            self._written.clear()  # every identity's kubeconfig names this start's port
        write_kubeconfig(self.kubeconfig_path, self.url)
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self._emulator, kmock.Server(self._emulator, host="127.0.0.1") as server:
            self._port = server.port
            self._ready.set()
            await self._stop.wait()
            self._emulator.close_watches()
            await asyncio.sleep(0.05)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(15)
        self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def set_unavailable(self, unavailable: bool) -> None:
        """An outage of the API server, or its end: while unavailable every request is answered 503
        ServiceUnavailable and the open watches are ended; what is stored stays (the pod runner works on)."""
        self._emulator.unavailable = unavailable
        if unavailable and self._loop is not None:
            self._loop.call_soon_threadsafe(self._emulator.close_watches)

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def kubeconfig_for(self, user: str) -> Path:
        """A kubeconfig whose token the emulator records as `user` (e.g. system:serviceaccount:ns:name).

        Written once per start of this server, whatever a previous server in the same workdir left there: a file
        from an earlier start names that start's port."""
        token = self.identities.token_for(user)
        safe = "".join(c if c.isalnum() or c in "-." else "_" for c in user)
        path = self._workdir / "kubeconfigs" / f"{safe}.yaml"
        with self._written_lock:
            if path not in self._written:
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(".partial")
                write_kubeconfig(partial, self.url, token=token)
                partial.replace(path)  # readers (pods starting now) never see half a file
                self._written.add(path)
        return path

    # ---- helpers --------------------------------------------------------------------------------------------------
    def apply(self, obj: dict[str, Any]) -> Obj:
        """Create or replace any object (CRDs included); status is written as given. Returns the stored object."""
        return self.store.apply(obj)

    def get(self, api_version: str, kind_plural: str, namespace: str | None, name: str) -> Obj | None:
        group, version = _split_api_version(api_version)
        try:
            return self.store.get(self.store.type_for(group, version, kind_plural), namespace, name)
        except errors.ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def list(
        self, api_version: str, kind_plural: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        group, version = _split_api_version(api_version)
        items, _ = self.store.list_objects(self.store.type_for(group, version, kind_plural), namespace, label_selector)
        return items

    def patch_status(
        self, api_version: str, kind_plural: str, namespace: str | None, name: str, status_patch: dict[str, Any]
    ) -> Obj:
        group, version = _split_api_version(api_version)
        rtype = self.store.type_for(group, version, kind_plural)
        return self.store.patch(
            rtype,
            namespace,
            name,
            "application/merge-patch+json",
            {"status": status_patch},
            "status" if rtype.has_status else None,
        )

    def delete(self, api_version: str, kind_plural: str, namespace: str | None, name: str) -> None:
        group, version = _split_api_version(api_version)
        try:
            self.store.delete(self.store.type_for(group, version, kind_plural), namespace, name)
        except errors.ApiError as exc:
            if exc.code != 404:
                raise
