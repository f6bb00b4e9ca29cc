"""End-to-end harness: one local cluster and one real operator per module; each scenario starts its own 4-rank
training Job (a real gloo DDP run with the sidecar and the hook injected through the environment) and its own
ProfileSession, then reads the verdict the analyzer Job wrote."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from stepscope_local.cluster import LocalCluster
from stepscope_local.demo_session import wait_operator_healthy, wait_ready_pods
from stepscope_local.install import install, start_operator
from stepscope_local.manifests import s3_location, training_job
from stepscope_local.ports import free_port
from stepscope_local.runner.pods import kill_group

API = "stepscope.dev/v1alpha1"
TERMINAL = ("Succeeded", "PartiallySucceeded", "Failed")
BUCKET = "stepscope-demo"
REPO = Path(__file__).resolve().parents[2]
INPUT_MS = "50"
"""what every rank of an input-bound training waits for each batch (Env.start_training(input_bound=True)): a rank
then computes ~12 ms of a ~65 ms step, and the four ranks hold about two thirds of one core between them"""


@dataclass
class Env:
    cluster: LocalCluster
    workdir: Path

    def start_training(
        self,
        name: str,
        slow_rank: int = -1,
        mode: str = "host",
        slow_ms: float = 60.0,
        extra_env: dict[str, str] | None = None,
        storage_base: str | None = None,
        input_bound: bool = False,
    ) -> None:
        """`storage_base`: the sidecars' STEPSCOPE_STORAGE_BASE (comma-separated) instead of the demo's.
        `input_bound`: every rank waits INPUT_MS for each batch, for a balanced training whose scenario is not about
        compute: its steps mostly wait, as an input-bound job's do, so its four ranks leave the two shared cores to
        the other tests instead of holding both for as long as it runs; the ranks step evenly, and warm-up steps
        take seconds."""
        extra_env = {**(extra_env or {}), **({"INPUT_MS": INPUT_MS} if input_bound else {})}
        job = training_job(free_port(), slow_rank, mode, slow_ms, extra_env, storage_endpoint=self.cluster.s3_endpoint)
        job["metadata"]["name"] = name
        if storage_base is not None:
            sidecar = next(c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "stepscope-sidecar")
            next(e for e in sidecar["env"] if e["name"] == "STEPSCOPE_STORAGE_BASE")["value"] = storage_base
        self.cluster.api.apply(job)

    def ready_pods(self, job: str, count: int = 4, timeout: float = 300.0) -> list[dict[str, Any]]:
        return sorted(wait_ready_pods(self.cluster, count, timeout, job), key=lambda p: p["metadata"]["name"])

    def stop_training(self, name: str) -> None:
        self.cluster.api.delete("batch/v1", "jobs", "default", name)

    def apply_session(
        self,
        name: str,
        job: str,
        delete_artifacts: bool = False,
        storage: dict[str, Any] | None = None,
        **capture: Any,
    ) -> None:
        """`storage`: spec.storage instead of the local S3 bucket through its explicit endpoint."""
        session = {
            "apiVersion": API,
            "kind": "ProfileSession",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "targets": {"jobRef": {"kind": "Job", "name": job}},
                "capture": {
                    "steps": 6,
                    "skipSteps": 2,
                    "activities": ["cpu"],
                    "timeoutSeconds": 90,
                    "stepTimeoutSeconds": 10,
                    **capture,
                },
                "storage": storage
                or {
                    "uri": f"s3://{BUCKET}/sessions",
                    "endpoint": self.cluster.s3_endpoint,
                    "addressingStyle": "path",
                    "credentialsSecret": {"name": "stepscope-s3"},
                    "deleteOnSessionDelete": delete_artifacts,
                },
                # default analysis settings: 4 ranks share 2 CPU cores here, and the diagnosis measures that noise
                "ttlSecondsAfterFinished": 600,
            },
        }
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(session))
        result = self.cluster.kubectl("apply", "-f", str(path))
        assert result.returncode == 0, result.stderr

    def session(self, name: str) -> dict[str, Any]:
        obj = self.cluster.api.get(API, "profilesessions", "default", name)
        assert obj is not None, f"session {name} is gone"
        return obj

    def wait_phase(self, name: str, phases: tuple[str, ...] = TERMINAL, timeout: float = 300.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        obj: dict[str, Any] = {}
        while time.monotonic() < deadline:
            obj = self.session(name)
            if (obj.get("status") or {}).get("phase") in phases:
                return obj
            time.sleep(0.5)
        raise AssertionError(f"{name} never reached {phases}: {json.dumps(obj.get('status'), indent=1)[:3000]}")

    def report(self, obj: dict[str, Any]) -> dict[str, Any]:
        url = (obj.get("status") or {}).get("reportJSONURL")
        assert url, f"no report: {obj.get('status')}"
        bucket, key = s3_location(url)
        assert self.cluster.s3 is not None
        body = self.cluster.s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        report: dict[str, Any] = json.loads(body)
        return report


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("e2e")
    with LocalCluster(workdir=workdir / "cluster", buckets=(BUCKET,)) as cluster:
        install(cluster)
        port = free_port()
        command = [str(REPO / ".venv" / "bin" / "stepscope"), "operator"]
        operator = start_operator(cluster, workdir, command, port, namespaces="default")
        try:
            assert wait_operator_healthy(operator, port, 240), (workdir / "operator.log").read_text()[-3000:]
            yield Env(cluster, workdir)
        finally:
            kill_group(operator, 5)
