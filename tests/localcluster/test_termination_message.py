"""The runner keeps a container's termination message as the kubelet does: the process writes its
terminationMessagePath (here /dev/termination-log, rewritten to a file of the pod's, like a mount's path), and the
terminated state's `message` holds what it left there, cut at 4,096 bytes; a container that left nothing has none.
The analyzer Job hands its outcome back to the operator this way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from stepscope_local.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WRITE = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2] * int(sys.argv[3]))"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(buckets=("bucket-a",)) as c:
        yield c


def _terminated(cluster: LocalCluster, name: str, args: list[str]) -> dict[str, Any]:
    container = {"name": "c", "image": "ignored", "command": ["python", "-c", WRITE], "args": args,
                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}  # fmt: skip
    cluster.api.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
        }
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for pod in cluster.api.list("v1", "pods", "default", f"job-name={name}"):
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            if statuses and "terminated" in statuses[0]["state"]:
                return dict(statuses[0]["state"]["terminated"])
        time.sleep(0.1)
    raise AssertionError(f"the pod of Job {name} did not end")


def test_the_message_left_at_the_termination_path_is_the_terminated_states(cluster: LocalCluster) -> None:
    done = _terminated(cluster, "short", ["/dev/termination-log", '{"ok":true}', "1"])
    assert done["exitCode"] == 0 and done["message"] == '{"ok":true}'
    long = _terminated(cluster, "long", ["/dev/termination-log", "x", "10000"])
    assert long["message"] == "x" * 4096  # the kubelet's bound
    other = _terminated(cluster, "elsewhere", ["not-the-log", "x", "3"])
    assert "message" not in other
