"""One Pod as local processes: volumes as directories, init containers in order, then the containers; the pod's
status (phase, podIP, hostIP, container states, exit codes, Ready, termination messages) is written back to the
emulator.

A container's `terminationMessagePath` (default /dev/termination-log) is a file in the pod's folder: the path in the
container's arguments and environment is rewritten to it, as a mount's would be, and what the process left there
(its first 4,096 bytes, the kubelet's bound) is its terminated state's `message`."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from stepscope_local.kube.errors import ApiError
from stepscope_local.runner.containers import (
    VENV_BIN,
    ContainerConfigError,
    container_argv,
    container_env,
    decode_secret,
    rewrite_path,
)

if TYPE_CHECKING:
    from stepscope_local.kube.store import Store

logger = logging.getLogger(__name__)
POLL_S = 0.1


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RunnerConfig:
    kubeconfig_path: Path
    logs_dir: Path
    work_dir: Path
    nodes: tuple[str, ...] = ("node-0", "node-1", "node-2", "node-3")
    grace_seconds: float = 3.0
    pod_network: str | None = None  # loopback network of pod IPs; None: a free 127.N.0.0/16 (runner.networks)
    # (namespace, serviceAccountName) -> the kubeconfig of that identity; None: kubeconfig_path for every pod
    service_account_kubeconfig: Callable[[str, str], Path] | None = None
    # what every container's environment starts from, as a node's would (e.g. where OSS regions resolve to)
    node_env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes] | None
    log: IO[bytes] | None
    started_at: str
    probe: dict[str, Any] | None = None
    ports: dict[str, int] = field(default_factory=dict)
    ready: bool = False
    next_probe: float = 0.0
    probe_failures: int = 0  # consecutive failed probes (a Ready container turns unready at failureThreshold)
    exit_code: int | None = None
    reason: str = ""
    finished_at: str = ""
    termination: Path | None = None  # the host file standing for the container's terminationMessagePath


TERMINATION_MESSAGE_PATH = "/dev/termination-log"
MAX_TERMINATION_MESSAGE = 4096


def _termination_message(path: Path | None) -> str:
    """What a container left at its terminationMessagePath, cut as the kubelet cuts it."""
    if path is None:
        return ""
    try:
        with path.open("rb") as f:
            return f.read(MAX_TERMINATION_MESSAGE).decode("utf-8", "replace")
    except OSError:
        return ""


def kill_group(popen: subprocess.Popen[Any], grace: float) -> None:
    """SIGTERM the process group, SIGKILL what is left after `grace` seconds."""
    if popen.poll() is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)  # stray children of a finished leader
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(5)


class PodWorker:
    """Runs one pod in a thread until its containers finish or `stop()` is called."""

    def __init__(self, store: Store, pod: dict[str, Any], pod_ip: str, node: str, config: RunnerConfig) -> None:
        self.store = store
        self.config = config
        self.namespace = str(pod["metadata"]["namespace"])
        self.name = str(pod["metadata"]["name"])
        self.uid = str(pod["metadata"]["uid"])
        self.pod_ip = pod_ip
        self.node = node
        self._pods = store.type_for("", "v1", "pods")
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._procs: list[_Proc] = []
        self._thread = threading.Thread(target=self._run, name=f"pod-{self.name}", daemon=True)
        self.pod_dir: Path = config.work_dir / self.namespace / self.name
        self.log_dir: Path = config.logs_dir / self.namespace / self.name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._kill_all()
        self._thread.join(self.config.grace_seconds + 10)

    def kill_container(self, container: str, sig: int = signal.SIGKILL) -> bool:
        """Signal one container's process group (a crash, for tests); False when it is not running."""
        with self._lock:
            procs = [p for p in self._procs if p.name == container and p.popen and p.popen.poll() is None]
        for proc in procs:
            assert proc.popen is not None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.popen.pid, sig)
        return bool(procs)

    def log_path(self, container: str) -> Path:
        return self.log_dir / f"{container}.log"

    # ---- status ---------------------------------------------------------------------------------------------------
    def _patch_status(self, status: dict[str, Any]) -> None:
        if self._stopping.is_set():
            return
        with contextlib.suppress(ApiError):
            self.store.patch(
                self._pods, self.namespace, self.name, "application/merge-patch+json", {"status": status}, "status"
            )

    def _container_status(self, proc: _Proc, container: dict[str, Any]) -> dict[str, Any]:
        state: dict[str, Any]
        if proc.exit_code is not None:
            state = {
                "terminated": {
                    "exitCode": proc.exit_code,
                    "reason": proc.reason,
                    "startedAt": proc.started_at,
                    "finishedAt": proc.finished_at,
                }
            }
            message = _termination_message(proc.termination)
            if message:
                state["terminated"]["message"] = message
        else:
            state = {"running": {"startedAt": proc.started_at}}
        return {
            "name": proc.name,
            "image": container.get("image", ""),
            "imageID": "",
            "ready": proc.ready,
            "started": proc.exit_code is None,
            "restartCount": 0,
            "state": state,
            "containerID": f"local://{proc.popen.pid if proc.popen else 0}",
        }

    # ---- volumes --------------------------------------------------------------------------------------------------
    def _volumes(self, pod: dict[str, Any]) -> dict[str, Path]:
        dirs: dict[str, Path] = {}
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            path = self.pod_dir / "volumes" / vol["name"]
            path.mkdir(parents=True, exist_ok=True)
            data: dict[str, str] | None = None
            items = None
            if "secret" in vol:
                data = self._read("secrets", vol["secret"].get("secretName", ""))
                items = vol["secret"].get("items")
                if data is None and not vol["secret"].get("optional"):
                    raise ContainerConfigError(f"secret {vol['secret'].get('secretName')!r} not found")
            elif "configMap" in vol:
                data = self._read("configmaps", vol["configMap"].get("name", ""))
                items = vol["configMap"].get("items")
                if data is None and not vol["configMap"].get("optional"):
                    raise ContainerConfigError(f"configmap {vol['configMap'].get('name')!r} not found")
            for key, value in (data or {}).items():
                targets = [i["path"] for i in items or [] if i["key"] == key] if items else [key]
                for target in targets:
                    (path / target).parent.mkdir(parents=True, exist_ok=True)
                    (path / target).write_text(value)
            dirs[vol["name"]] = path
        return dirs

    def _read(self, plural: str, name: str) -> dict[str, str] | None:
        try:
            obj = self.store.get(self.store.type_for("", "v1", plural), self.namespace, name)
        except ApiError:
            return None
        if plural == "secrets":
            return decode_secret(obj)
        return {k: str(v) for k, v in (obj.get("data") or {}).items()}

    def _mounts(self, container: dict[str, Any], volumes: dict[str, Path]) -> dict[str, Path]:
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts") or []:
            host = volumes.get(mount["name"])
            if host is None:
                raise ContainerConfigError(f"volume {mount['name']!r} is not defined")
            if mount.get("subPath"):
                host = host / mount["subPath"]
                host.mkdir(parents=True, exist_ok=True)
            mounts[mount["mountPath"]] = host
        return mounts

    def _kubeconfig(self, pod: dict[str, Any]) -> Path:
        """The kubeconfig of the pod's ServiceAccount (its own token), as the in-cluster config would be."""
        if self.config.service_account_kubeconfig is None:
            return self.config.kubeconfig_path
        account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
        return self.config.service_account_kubeconfig(self.namespace, account)

    # ---- processes ------------------------------------------------------------------------------------------------
    def _launch(self, container: dict[str, Any], pod: dict[str, Any], volumes: dict[str, Path]) -> _Proc:
        name = container["name"]
        started = _now()
        termination = self.pod_dir / "termination" / name
        try:
            mounts = self._mounts(container, volumes)
            mounts[str(container.get("terminationMessagePath") or TERMINATION_MESSAGE_PATH)] = termination
            termination.parent.mkdir(parents=True, exist_ok=True)
            base = {
                "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
                "HOME": os.environ.get("HOME", "/tmp"),
                "LANG": "C.UTF-8",
                "HOSTNAME": self.name,
                "PYTHONUNBUFFERED": "1",
                "KUBECONFIG": str(self._kubeconfig(pod)),  # stands in for the in-cluster service account
                **self.config.node_env,
            }
            env = container_env(
                container, pod, lambda ns, n: self._read("secrets", n), lambda ns, n: self._read("configmaps", n), base
            )
            # only what the manifest declares is rewritten: the runner's own values (KUBECONFIG may sit under
            # /tmp, where a pod often mounts an emptyDir) stay host paths
            env = {k: v if base.get(k) == v else rewrite_path(v, mounts) for k, v in env.items()}
            argv = container_argv(container, env, mounts)
            workdir = rewrite_path(container["workingDir"], mounts) if container.get("workingDir") else None
            cwd = Path(workdir) if workdir else self.pod_dir
            cwd.mkdir(parents=True, exist_ok=True)
        except ContainerConfigError as exc:
            logger.warning("pod %s/%s container %s: %s", self.namespace, self.name, name, exc)
            return _Proc(
                name, None, None, started, exit_code=128, reason="CreateContainerConfigError", finished_at=_now()
            )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path(name).open("ab")
        log.write(f"# {' '.join(argv)}\n".encode())
        log.flush()
        try:
            popen = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            log.write(f"cannot start: {exc}\n".encode())
            log.close()
            return _Proc(name, None, None, started, exit_code=127, reason="StartError", finished_at=_now())
        ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name")}
        proc = _Proc(
            name,
            popen,
            log,
            started,
            probe=container.get("readinessProbe"),
            ports=ports,
            ready=container.get("readinessProbe") is None,
            termination=termination,
        )
        with self._lock:
            self._procs.append(proc)
        return proc

    def _poll(self, proc: _Proc) -> bool:
        """Update exit state; True when it changed."""
        if proc.exit_code is not None or proc.popen is None:
            return False
        code = proc.popen.poll()
        if code is None:
            return False
        proc.exit_code = code if code >= 0 else 128 - code
        proc.reason = "Completed" if code == 0 else "Error"
        proc.finished_at = _now()
        proc.ready = False
        if proc.log:
            proc.log.close()
        return True

    def _probe(self, proc: _Proc) -> bool:
        """Run the readiness probe when due; True when readiness changed."""
        if proc.probe is None or proc.exit_code is not None or time.monotonic() < proc.next_probe:
            return False
        http = proc.probe.get("httpGet")
        proc.next_probe = time.monotonic() + min(float(proc.probe.get("periodSeconds", 1)), 1.0)
        ok = False
        if http:
            port = http.get("port")
            port_num = proc.ports.get(port, 0) if isinstance(port, str) and not port.isdigit() else int(port)
            url = f"http://{http.get('host') or self.pod_ip}:{port_num}{http.get('path', '/')}"
            try:
                with urllib.request.urlopen(url, timeout=float(proc.probe.get("timeoutSeconds", 1))) as resp:
                    ok = 200 <= resp.status < 400
            except (urllib.error.URLError, OSError, ValueError):
                ok = False
        else:
            ok = True  # exec/tcp probes are not emulated: treated as passing
        # As the kubelet: one success makes a container Ready, failureThreshold (3) failures in a row unready, so
        # a probe that is slow once on a busy machine does not flap the pod.
        proc.probe_failures = 0 if ok else proc.probe_failures + 1
        ready = ok or (proc.ready and proc.probe_failures < int(proc.probe.get("failureThreshold", 3)))
        changed = ready != proc.ready
        proc.ready = ready
        return changed

    def _kill_all(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            if proc.popen is not None:
                kill_group(proc.popen, self.config.grace_seconds)
            if proc.log and not proc.log.closed:
                proc.log.close()

    # ---- lifecycle ------------------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._lifecycle()
        except Exception:
            logger.exception("pod %s/%s runner failed", self.namespace, self.name)
            self._patch_status({"phase": "Failed", "reason": "RunnerError"})
        finally:
            self._kill_all()

    def _lifecycle(self) -> None:
        with contextlib.suppress(ApiError):
            self.store.patch(
                self._pods, self.namespace, self.name, "application/merge-patch+json", {"spec": {"nodeName": self.node}}
            )
        self._patch_status(
            {
                "phase": "Pending",
                "podIP": self.pod_ip,
                "podIPs": [{"ip": self.pod_ip}],
                "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}],
                "startTime": _now(),
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()}],
            }
        )
        try:
            pod = self.store.get(self._pods, self.namespace, self.name)
        except ApiError:
            return
        spec = pod.get("spec") or {}
        try:
            volumes = self._volumes(pod)
        except ContainerConfigError as exc:
            self._patch_status({"phase": "Failed", "reason": "CreateContainerConfigError", "message": str(exc)})
            return
        sidecars: list[_Proc] = []
        init_statuses: list[dict[str, Any]] = []
        for container in spec.get("initContainers") or []:
            if self._stopping.is_set():
                return
            proc = self._launch(container, pod, volumes)
            if container.get("restartPolicy") == "Always":  # native sidecar: runs beside the containers
                sidecars.append(proc)
                continue
            while proc.popen is not None and not self._poll(proc) and not self._stopping.is_set():
                time.sleep(POLL_S)
            init_statuses.append(self._container_status(proc, container))
            self._patch_status({"initContainerStatuses": init_statuses})
            if proc.exit_code != 0:
                self._patch_status(
                    {
                        "phase": "Failed",
                        "reason": "InitContainerFailed",
                        "containerStatuses": [],
                        "conditions": self._conditions(False),
                    }
                )
                return
        containers = spec.get("containers") or []
        procs = [self._launch(c, pod, volumes) for c in containers]
        by_name = {c["name"]: c for c in containers}
        self._publish(procs, by_name, "Running")
        while not self._stopping.is_set():
            changed = False
            for proc in procs + sidecars:
                changed |= self._poll(proc)
                changed |= self._probe(proc)
            if all(p.exit_code is not None for p in procs):
                break
            if changed:
                self._publish(procs, by_name, "Running")
            time.sleep(POLL_S)
        if self._stopping.is_set():
            return
        for proc in sidecars:
            if proc.popen is not None:
                kill_group(proc.popen, self.config.grace_seconds)
        phase = "Succeeded" if all(p.exit_code == 0 for p in procs) else "Failed"
        self._publish(procs, by_name, phase)

    def _conditions(self, ready: bool) -> list[dict[str, Any]]:
        value = "True" if ready else "False"
        now = _now()
        return [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": value, "lastTransitionTime": now},
            {"type": "Ready", "status": value, "lastTransitionTime": now},
        ]

    def _publish(self, procs: list[_Proc], by_name: dict[str, dict[str, Any]], phase: str) -> None:
        ready = phase == "Running" and all(p.ready and p.exit_code is None for p in procs)
        self._patch_status(
            {
                "phase": phase,
                "conditions": self._conditions(ready),
                "containerStatuses": [self._container_status(p, by_name[p.name]) for p in procs],
            }
        )

    def cleanup(self) -> None:
        shutil.rmtree(self.pod_dir, ignore_errors=True)
