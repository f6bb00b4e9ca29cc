"""`LocalCluster`: the emulator, moto S3 and the pod/Job runner together, started and stopped as one."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import yaml

from stepscope_local.kube.identity import service_account_user
from stepscope_local.runner import Runner
from stepscope_local.runner.pods import RunnerConfig
from stepscope_local.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from stepscope_storage.endpoints import ENV_OSS_ENDPOINT_TEMPLATE

if TYPE_CHECKING:
    from stepscope_local.kube.server import EmulatorServer

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = REPO_ROOT / "crds" / "profilesessions.stepscope.dev.yaml"
TRIGGER_CRD_PATH = REPO_ROOT / "crds" / "profiletriggers.stepscope.dev.yaml"


class LocalCluster:
    """Context manager. `workdir` holds the kubeconfig, logs and pod volumes (a temporary folder by default)."""

    s3_access_key = ACCESS_KEY
    s3_secret_key = SECRET_KEY
    s3_region = REGION

    def __init__(
        self,
        workdir: Path | None = None,
        nodes: tuple[str, ...] = ("node-0", "node-1", "node-2", "node-3"),
        buckets: tuple[str, ...] = (),
        with_s3: bool = True,
        apply_crd: bool = True,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="stepscope-local-")
            workdir = Path(self._tmp.name)
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs_dir = workdir / "logs"
        from stepscope_local.kube.server import EmulatorServer  # kmock: loaded by a command that runs a cluster

        self.api: EmulatorServer = EmulatorServer(workdir=workdir / "kube")
        self.s3 = S3Server(log_path=workdir / "moto.log") if with_s3 else None
        self._buckets = buckets
        self._nodes = nodes
        self._apply_crd = apply_crd
        self.runner: Runner | None = None
        self._kubectl_cache = workdir / "kubectl-cache"

    # ---- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> LocalCluster:
        try:
            self.api.start()
            if self.s3 is not None:
                self.s3.start()
                for bucket in self._buckets:
                    self.s3.create_bucket(bucket)
            config = RunnerConfig(
                kubeconfig_path=self.api.kubeconfig_path,
                logs_dir=self.logs_dir,
                work_dir=self.workdir / "pods",
                nodes=self._nodes,
                service_account_kubeconfig=self.service_account_kubeconfig,
                node_env=self.node_env,
            )
            self.runner = Runner(self.api.store, config).start()
            self.api.log_reader = self.runner.log_reader
            if self._apply_crd:
                self.apply_file(CRD_PATH)
                self.apply_file(TRIGGER_CRD_PATH)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()
            self.runner = None
        if self.s3 is not None:
            self.s3.stop()
        self.api.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- accessors ------------------------------------------------------------------------------------------------
    @property
    def kubeconfig_path(self) -> Path:
        return self.api.kubeconfig_path

    @property
    def s3_endpoint(self) -> str:
        if self.s3 is None:
            raise RuntimeError("this cluster runs without S3")
        return self.s3.endpoint

    @property
    def node_env(self) -> dict[str, str]:
        """What every pod's containers see beside their manifest's env: here every OSS region's endpoint is the
        local S3 server (stepscope_storage.endpoints), so oss:// sessions with only a region work locally."""
        if self.s3 is None:
            return {}
        return {ENV_OSS_ENDPOINT_TEMPLATE: self.s3.endpoint}

    def service_account_kubeconfig(self, namespace: str, account: str) -> Path:
        """The kubeconfig of a ServiceAccount: requests with it are recorded as that identity (api.audit)."""
        return self.api.kubeconfig_for(service_account_user(namespace, account))

    def s3_stop(self, keep_objects: bool = False) -> None:
        """Simulate an S3 outage (moto's stored objects are lost unless `keep_objects`; buckets come back on
        s3_start)."""
        if self.s3 is not None:
            self.s3.stop(keep_objects=keep_objects)

    def s3_start(self) -> None:
        if self.s3 is not None:
            self.s3.start()

    # ---- helpers --------------------------------------------------------------------------------------------------
    def kubectl(
        self, *args: str, timeout: float = 60, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        exe = shutil.which("kubectl") or "/usr/bin/kubectl"
        cmd = [exe, "--kubeconfig", str(self.kubeconfig_path), "--cache-dir", str(self._kubectl_cache), *args]
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            input=input_text,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig_path)},
        )

    def create_secret(self, namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        return self.api.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace},
                "data": encoded,
            }
        )

    def apply_file(self, path: Path) -> list[dict[str, Any]]:
        """Apply every document of a YAML file (objects of any kind, CRDs included)."""
        return [self.api.apply(doc) for doc in yaml.safe_load_all(Path(path).read_text()) if doc]

    def kill_container(self, namespace: str, pod: str, container: str) -> bool:
        """SIGKILL one container's processes (e.g. a dead sidecar); the pod status then shows it terminated."""
        return self.runner is not None and self.runner.kill_container(namespace, pod, container)

    def pod_log(self, namespace: str, pod: str, container: str) -> str:
        return (self.runner.log_reader(namespace, pod, container) if self.runner else None) or ""
