"""LocalCluster end to end over real processes: Jobs and Pods from manifests, S3 outage, clean stop."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import psutil
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from stepscope_local.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

SCRIPT = """
import os, pathlib, sys
print("INDEX", os.environ.get("JOB_COMPLETION_INDEX"), "IP", os.environ["POD_IP"], "NODE", os.environ["NODE"])
print("NAME", os.environ["POD_NAME"], "NS", os.environ["POD_NS"], "SECRET", os.environ["TOKEN"])
print("GREETING", os.environ["GREETING"])
print("FILE", pathlib.Path(sys.argv[1]).read_text(), "INIT", pathlib.Path(os.environ["SHARED"], "init.txt").read_text())
print("CWD", os.getcwd() == os.environ["SHARED"])
"""


def _eventually(check: Callable[[], Any], timeout: float = 180.0) -> Any:
    """Poll until `check` is truthy: cluster actions take what they take on a busy machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(buckets=("bucket-a",)) as c:
        yield c


def _job(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": containers}
    pod_spec.update(spec.pop("pod", {}))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}, **spec},
    }


def _condition(job: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind and cond["status"] == "True":
            return cond  # type: ignore[no-any-return]
    return None


def test_indexed_job_runs_pods_from_their_manifests(cluster: LocalCluster) -> None:
    cluster.create_secret("default", "creds", {"token": "s3cr3t"})
    container = {
        "name": "main",
        "image": "ignored",
        "command": ["python", "-c", SCRIPT],
        "args": ["/etc/creds/token"],
        "workingDir": "/shared",
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "WHO", "value": "world"},
            {"name": "GREETING", "value": "hello $(WHO)"},
            {"name": "SHARED", "value": "/shared"},
        ],
        "volumeMounts": [{"name": "creds", "mountPath": "/etc/creds"}, {"name": "scratch", "mountPath": "/shared"}],
    }
    init = {
        "name": "init",
        "image": "ignored",
        "command": ["sh", "-c", 'printf ready > "$1"', "sh"],
        "args": ["/shared/init.txt"],
        "volumeMounts": [{"name": "scratch", "mountPath": "/shared"}],
    }
    job = _job(
        "idx",
        [container],
        completionMode="Indexed",
        completions=3,
        parallelism=3,
        pod={
            "initContainers": [init],
            "volumes": [{"name": "creds", "secret": {"secretName": "creds"}}, {"name": "scratch", "emptyDir": {}}],
        },
    )
    cluster.api.apply(job)
    done = _eventually(
        lambda: (
            _condition(cluster.api.get("batch/v1", "jobs", "default", "idx"), "Complete")
            and cluster.api.get("batch/v1", "jobs", "default", "idx")
        )
    )
    assert done["status"]["succeeded"] == 3 and done["status"]["completedIndexes"] == "0-2"
    assert done["status"]["active"] == 0
    pods = cluster.api.list("v1", "pods", "default", "batch.kubernetes.io/job-name=idx")
    assert len(pods) == 3
    ips = {p["status"]["podIP"] for p in pods}
    assert len(ips) == 3 and all(ip.startswith("127.") and not ip.startswith("127.0.0.") for ip in ips)
    for pod in pods:
        meta = pod["metadata"]
        index = meta["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert meta["labels"]["job-name"] == "idx" and meta["ownerReferences"][0]["kind"] == "Job"
        assert pod["status"]["phase"] == "Succeeded"
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        log = cluster.pod_log("default", meta["name"], "main")
        assert f"INDEX {index} IP {pod['status']['podIP']} NODE {pod['spec']['nodeName']}" in log
        assert f"NAME {meta['name']} NS default SECRET s3cr3t" in log
        assert "GREETING hello world" in log and "FILE s3cr3t INIT ready" in log and "CWD True" in log
    assert {p["spec"]["nodeName"] for p in pods} <= {"node-0", "node-1", "node-2", "node-3"}
    logs = cluster.kubectl("logs", pods[0]["metadata"]["name"], "-c", "main")
    assert logs.returncode == 0 and "GREETING hello world" in logs.stdout
    table = cluster.kubectl("get", "pods", "-o", "wide")
    assert "Succeeded" in table.stdout and pods[0]["status"]["podIP"] in table.stdout


def test_backoff_limit_fails_the_job(cluster: LocalCluster) -> None:
    cluster.api.apply(
        _job("fails", [{"name": "c", "command": ["python", "-c", "raise SystemExit(3)"]}], backoffLimit=1)
    )
    job = _eventually(
        lambda: (
            _condition(cluster.api.get("batch/v1", "jobs", "default", "fails"), "Failed")
            and cluster.api.get("batch/v1", "jobs", "default", "fails")
        )
    )
    assert job["status"]["failed"] == 2
    assert _condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    pod = cluster.api.list("v1", "pods", "default", "job-name=fails")[0]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def _gone(pid: int) -> bool:
    """The process has exited (or is a zombie); it may exit between any two looks at it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_readiness_probe_and_pod_deletion_kills_processes(cluster: LocalCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "web",
                    "command": ["python", "-m", "http.server", "--bind", "$(POD_IP)", "8080"],
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                }
            ],
        },
    }
    cluster.api.apply(pod)

    def ready() -> dict[str, Any] | None:
        obj = cluster.api.get("v1", "pods", "default", "web")
        conds = {c["type"]: c["status"] for c in (obj or {}).get("status", {}).get("conditions", [])}
        return obj if conds.get("Ready") == "True" else None

    obj = _eventually(ready)
    pid = int(obj["status"]["containerStatuses"][0]["containerID"].rsplit("/", 1)[1])
    assert psutil.pid_exists(pid)
    waited = cluster.kubectl("wait", "--for=condition=Ready", "pod/web", "--timeout=120s", timeout=150)
    assert waited.returncode == 0, waited.stderr
    cluster.api.delete("v1", "pods", "default", "web")
    _eventually(lambda: _gone(pid))


def test_active_deadline_fails_and_stops_pods(cluster: LocalCluster) -> None:
    cluster.api.apply(_job("slow", [{"name": "c", "command": ["sleep", "60"]}], activeDeadlineSeconds=1))
    job = _eventually(lambda: _condition(cluster.api.get("batch/v1", "jobs", "default", "slow"), "Failed"))
    assert job["reason"] == "DeadlineExceeded"
    _eventually(lambda: not cluster.api.list("v1", "pods", "default", "job-name=slow"))


def test_ttl_after_finished_deletes_the_job_and_its_pods(cluster: LocalCluster) -> None:
    cluster.api.apply(_job("ttl", [{"name": "c", "command": ["sleep", "1"]}], ttlSecondsAfterFinished=0))
    _eventually(lambda: cluster.api.list("v1", "pods", "default", "job-name=ttl"))
    _eventually(lambda: cluster.api.get("batch/v1", "jobs", "default", "ttl") is None)
    _eventually(lambda: not cluster.api.list("v1", "pods", "default", "job-name=ttl"))


def test_s3_outage_and_restart_on_the_same_port(cluster: LocalCluster) -> None:
    endpoint = cluster.s3_endpoint
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=cluster.s3_access_key,
        aws_secret_access_key=cluster.s3_secret_key,
        region_name=cluster.s3_region,
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )
    s3.put_object(Bucket="bucket-a", Key="k", Body=b"v")
    assert s3.get_object(Bucket="bucket-a", Key="k")["Body"].read() == b"v"
    cluster.s3_stop()
    with pytest.raises(EndpointConnectionError):
        s3.list_objects_v2(Bucket="bucket-a")
    cluster.s3_start()
    assert cluster.s3_endpoint == endpoint
    assert s3.list_objects_v2(Bucket="bucket-a")["KeyCount"] == 0  # the bucket is back, empty


@pytest.mark.timeout(400)
def test_stop_leaves_no_process_behind() -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # e.g. the module fixture's moto
    with LocalCluster() as c:
        c.api.apply(
            _job(
                "sleepy",
                [{"name": "c", "command": ["sleep", "60"]}, {"name": "d", "command": ["sleep", "60"]}],
                completions=2,
                parallelism=2,
            )
        )
        _eventually(lambda: len([p for p in psutil.Process().children(recursive=True) if p.name() == "sleep"]) == 4)
        assert any(p.name() == "moto_server" and p.pid not in before for p in psutil.Process().children(recursive=True))
        kubeconfig = c.kubeconfig_path
    left = [p for p in psutil.Process(os.getpid()).children(recursive=True) if p.pid not in before]
    assert not left
    assert not kubeconfig.exists()


def test_kill_container_terminates_only_that_container(cluster: LocalCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "two", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "a", "command": ["sleep", "60"]}, {"name": "b", "command": ["sleep", "60"]}],
        },
    }
    cluster.api.apply(pod)

    def statuses() -> dict[str, Any]:
        obj = cluster.api.get("v1", "pods", "default", "two") or {}
        return {s["name"]: s["state"] for s in (obj.get("status") or {}).get("containerStatuses") or []}

    _eventually(lambda: "running" in statuses().get("b", {}))
    assert cluster.kill_container("default", "two", "b")
    states = _eventually(lambda: (s := statuses()) and "terminated" in s.get("b", {}) and s)
    assert states["b"]["terminated"]["exitCode"] == 137 and "running" in states["a"]
    cluster.api.delete("v1", "pods", "default", "two")


def test_runner_env_is_not_rewritten_by_a_tmp_mount(cluster: LocalCluster) -> None:
    script = "import os, pathlib; print('KC', pathlib.Path(os.environ['KUBECONFIG']).exists(), os.environ['MINE'])"
    cluster.api.apply(
        _job(
            "tmpmount",
            [
                {
                    "name": "c",
                    "command": ["python", "-c", script],
                    "env": [{"name": "MINE", "value": "/tmp/x"}],
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            pod={"volumes": [{"name": "tmp", "emptyDir": {}}]},
        )
    )
    _eventually(lambda: _condition(cluster.api.get("batch/v1", "jobs", "default", "tmpmount"), "Complete"))
    pod = cluster.api.list("v1", "pods", "default", "job-name=tmpmount")[0]
    log = cluster.pod_log("default", pod["metadata"]["name"], "c")
    assert "KC True " in log and "/volumes/tmp/x" in log
