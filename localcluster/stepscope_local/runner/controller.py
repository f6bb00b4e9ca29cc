"""`Runner`: watches Pods and Jobs in the emulator's store; runs pods as local processes, drives Jobs."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import itertools
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from stepscope_local.kube.errors import ApiError
from stepscope_local.kube.store import Store
from stepscope_local.runner.jobs import plan_job, pod_for
from stepscope_local.runner.networks import claim_network
from stepscope_local.runner.pods import PodWorker, RunnerConfig

logger = logging.getLogger(__name__)
SKIP_ANNOTATION = "stepscope.dev/local-runner"  # "skip": leave the pod to the test that created it
TICK_S = 0.5


def pod_ips(network: str) -> Iterator[str]:
    """Pod IPs from a loopback network (e.g. "127.7.0.0/16", one this cluster claimed: runner.networks)."""
    for address in ipaddress.IPv4Network(network).hosts():
        if address.packed[-1] not in (0, 1, 255):
            yield str(address)


class Runner:
    def __init__(self, store: Store, config: RunnerConfig) -> None:
        self.store = store
        self.config = config
        self._pods = store.type_for("", "v1", "pods")
        self._jobs = store.type_for("batch", "v1", "jobs")
        self._events: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="local-runner", daemon=True)
        self._workers: dict[str, PodWorker] = {}  # pod uid -> worker
        self._by_name: dict[tuple[str, str], PodWorker] = {}
        self._stoppers: list[threading.Thread] = []
        self._network = claim_network(config.pod_network)  # no other local cluster hands out its IPs
        self._ips = pod_ips(self._network.network)
        self._nodes = itertools.cycle(config.nodes)
        self._unsubscribe: list[Any] = []
        self._lock = threading.Lock()

    # ---- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> Runner:
        for kind, rtype in (("pod", self._pods), ("job", self._jobs)):
            initial, unsubscribe = self.store.subscribe(rtype, None, None, self._enqueue(kind))
            for event_type, obj, _ in initial:
                self._events.put((kind, event_type, obj))
            self._unsubscribe.append(unsubscribe)
        self._thread.start()
        return self

    def _enqueue(self, kind: str) -> Callable[[str, dict[str, Any], int], None]:
        def put(event_type: str, obj: dict[str, Any], rv: int) -> None:
            self._events.put((kind, event_type, obj))

        return put

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._stop.set()
        self._thread.join(10)
        with self._lock:
            workers = list(self._workers.values())
        stoppers = [threading.Thread(target=w.stop) for w in workers]
        for t in stoppers:
            t.start()
        for t in stoppers + self._stoppers:
            t.join(30)
        self._network.release()

    def kill_container(self, namespace: str, pod: str, container: str) -> bool:
        with self._lock:
            worker = self._by_name.get((namespace, pod))
        return worker is not None and worker.kill_container(container)

    def log_reader(self, namespace: str, name: str, container: str | None) -> str | None:
        with self._lock:
            worker = self._by_name.get((namespace, name))
        if worker is None:
            return None
        if container is None:
            logs = sorted(worker.log_dir.glob("*.log"))
            path = logs[0] if logs else None
        else:
            path = worker.log_path(container)
        if path is None or not path.exists():
            return ""
        text: str = path.read_text(errors="replace")
        return text

    # ---- event loop -----------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        last_tick = 0.0
        while not self._stop.is_set():
            try:
                kind, event_type, obj = self._events.get(timeout=TICK_S)
            except queue.Empty:
                kind = ""
            try:
                if kind == "pod":
                    self._on_pod(event_type, obj)
                elif kind == "job" and event_type != "DELETED":
                    self._reconcile(obj["metadata"]["namespace"], obj["metadata"]["name"])
                now = dt.datetime.now(dt.UTC).timestamp()
                if now - last_tick >= TICK_S:  # deadlines and TTLs
                    last_tick = now
                    for job in self.store.list_objects(self._jobs, None)[0]:
                        self._reconcile(job["metadata"]["namespace"], job["metadata"]["name"])
            except Exception:
                logger.exception("local runner failed on a %s event", kind)

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        with self._lock:
            worker = self._workers.get(uid)
        if event_type == "DELETED" or meta.get("deletionTimestamp"):
            if worker is not None:
                with self._lock:
                    self._workers.pop(uid, None)
                stopper = threading.Thread(target=worker.stop, daemon=True)
                stopper.start()
                self._stoppers = [t for t in self._stoppers if t.is_alive()] + [stopper]
        elif worker is None and (meta.get("annotations") or {}).get(SKIP_ANNOTATION) != "skip":
            phase = (pod.get("status") or {}).get("phase", "Pending")
            if phase == "Pending" and not (pod.get("status") or {}).get("podIP"):
                node = (pod.get("spec") or {}).get("nodeName") or next(self._nodes)
                worker = PodWorker(self.store, pod, next(self._ips), node, self.config)
                with self._lock:
                    self._workers[uid] = worker
                    self._by_name[(meta["namespace"], meta["name"])] = worker
                worker.start()
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "Job" and ref.get("controller"):
                self._reconcile(meta["namespace"], ref["name"])

    def _reconcile(self, namespace: str, name: str) -> None:
        try:
            job = self.store.get(self._jobs, namespace, name)
        except ApiError:
            return
        if job["metadata"].get("deletionTimestamp"):
            return
        uid = job["metadata"]["uid"]
        pods, _ = self.store.list_objects(self._pods, namespace, f"batch.kubernetes.io/controller-uid={uid}")
        plan = plan_job(job, pods, dt.datetime.now(dt.UTC))
        for index in plan.create:
            self.store.create(self._pods, namespace, pod_for(job, index))
        for pod_name in plan.delete:
            with contextlib.suppress(ApiError):
                self.store.delete(self._pods, namespace, pod_name)
        try:
            self.store.patch(
                self._jobs, namespace, name, "application/merge-patch+json", {"status": plan.status}, "status"
            )
            if plan.expired:
                self.store.delete(self._jobs, namespace, name)
        except ApiError:
            pass
