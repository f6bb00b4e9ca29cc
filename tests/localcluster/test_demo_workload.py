"""The demo's workload on the local cluster, without the operator: the exact pod spec of examples/demo runs
(hook init container, trainer, sidecar with Secret env and token volume), the sidecars capture on request and
upload to moto in the flat traces layout, `stepscope analyze` of what they uploaded names the planted slow rank,
and `stepscope fetch` lays the session out for HTA (which loads every rank) and TensorBoard."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from stepscope_contract.tokens import namespace_token
from stepscope_contract.wire import CaptureOptions, CaptureRequest, CaptureState, SessionRef, StorageDestination
from stepscope_local.cluster import LocalCluster
from stepscope_local.install import install
from stepscope_local.manifests import training_job
from stepscope_local.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
TOKEN = namespace_token("demo-master-token", "default")  # what examples/demo/secrets.yaml holds


def _call(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        out: dict[str, Any] = json.loads(resp.read())
        return out


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def test_demo_pods_capture_to_s3_and_the_analysis_names_the_slow_rank(tmp_path: Path) -> None:
    with LocalCluster(workdir=tmp_path / "cluster", buckets=("stepscope-demo",)) as cluster:
        install(cluster)  # Secrets, storage settings (the sidecars' allowed destinations), the training script
        cluster.api.apply(
            training_job(free_port(), slow_rank=2, slow_mode="host", slow_ms=40, storage_endpoint=cluster.s3_endpoint)
        )
        deadline = time.monotonic() + 240
        pods: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            pods = cluster.api.list("v1", "pods", "default", "job-name=ddp-train")
            if len(pods) == 4 and all(_ready(p) for p in pods):
                break
            time.sleep(0.5)
        assert len(pods) == 4 and all(_ready(p) for p in pods), cluster.kubectl("get", "pods").stdout
        time.sleep(2)  # some training steps
        session_uri = "s3://stepscope-demo/sessions/default/demo-0000abcd"
        options = CaptureOptions(
            steps=5, skip_steps=2, activities=["cpu"], timeout_seconds=240, step_timeout_seconds=60
        )
        for pod in pods:
            request = CaptureRequest(
                capture_id="cap-1",
                session=SessionRef(namespace="default", name="demo", uid="0000abcd-1111"),
                options=options,
                destination=StorageDestination(
                    session_uri=session_uri, endpoint=cluster.s3_endpoint, addressing_style="path"
                ),
            )
            _call(f"http://{pod['status']['podIP']}:8471/v1/captures", request.model_dump(mode="json", by_alias=True))
        states: dict[str, str] = {}
        captured_by = time.monotonic() + 240
        while time.monotonic() < captured_by:
            for pod in pods:
                status = _call(f"http://{pod['status']['podIP']}:8471/v1/captures/cap-1")
                states[pod["metadata"]["name"]] = status["state"]
            if all(CaptureState(s).terminal for s in states.values()):
                break
            time.sleep(0.5)
        assert set(states.values()) == {CaptureState.UPLOADED}, states
        keys = [o["Key"] for o in cluster.s3.client().list_objects_v2(Bucket="stepscope-demo")["Contents"]]  # type: ignore[union-attr]
        for rank in range(4):
            assert f"sessions/default/demo-0000abcd/traces/rank{rank}.pt.trace.json.gz" in keys, keys
            assert f"sessions/default/demo-0000abcd/traces/rank{rank}/manifest.json" in keys, keys
        out = tmp_path / "report"
        env = {
            "AWS_ACCESS_KEY_ID": cluster.s3_access_key,
            "AWS_SECRET_ACCESS_KEY": cluster.s3_secret_key,
            "PATH": str(Path(sys.executable).parent),
            "HOME": str(tmp_path),
        }
        analyzed = subprocess.run(
            [
                str(Path(sys.executable).parent / "stepscope"),
                "analyze",
                session_uri,
                "--endpoint",
                cluster.s3_endpoint,
                "-o",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
            env=env,
        )
        assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
        report = json.loads((out / "report.json").read_text())
        assert "report.html" in {p.name for p in out.iterdir()}
        diagnosis = report["diagnosis"]
        print("verdict:", diagnosis["verdict"])
        slow = {r["rank"]: r["cause"] for r in diagnosis["slow_ranks"]}
        assert slow.get(2) == "host", diagnosis
        _fetch_for_local_tools(session_uri, cluster.s3_endpoint, tmp_path, env)


def _fetch_for_local_tools(session_uri: str, endpoint: str, tmp_path: Path, env: dict[str, str]) -> None:
    names = [f"rank{r}.pt.trace.json.gz" for r in range(4)]
    for layout, expected in (
        ("hta", names),
        ("tensorboard", [f"demo-0000abcd/{n}" for n in names]),
        ("session", [f"traces/{n}" for n in names] + [f"traces/rank{r}/manifest.json" for r in range(4)]),
    ):
        dest = tmp_path / f"fetched-{layout}"
        cmd = [str(Path(sys.executable).parent / "stepscope"), "fetch", session_uri, str(dest), "--layout", layout,
               "--endpoint", endpoint, "--addressing-style", "path", "--quiet"]  # fmt: skip
        fetched = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=env)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        assert set(expected) <= set(got) and (layout == "session" or got == sorted(expected)), (layout, got)
    hta = pytest.importorskip("hta.trace_analysis", reason="HTA comes with the bench dependency group")
    analysis = hta.TraceAnalysis(trace_dir=str(tmp_path / "fetched-hta"))
    assert sorted(analysis.t.traces) == [0, 1, 2, 3]
