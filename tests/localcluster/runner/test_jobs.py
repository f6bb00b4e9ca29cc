"""Job controller decisions (pure)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from stepscope_local.runner.jobs import INDEX_KEY, compress_indexes, plan_job, pod_for

pytestmark = pytest.mark.unit
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "uid": "uid-1"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "command": ["true"]}]},
            },
            **spec,
        },
    }


def _pod(index: int | None, phase: str) -> dict[str, Any]:
    ann = {INDEX_KEY: str(index)} if index is not None else {}
    return {"metadata": {"name": f"p{index}-{phase}", "annotations": ann}, "status": {"phase": phase}}


def test_indexed_creates_missing_indexes_up_to_parallelism() -> None:
    plan = plan_job(_job(completionMode="Indexed", completions=4, parallelism=2), [_pod(0, "Succeeded")], NOW)
    assert plan.create == [1, 2] and plan.status["active"] == 2 and plan.status["succeeded"] == 1
    assert plan.status["completedIndexes"] == "0"


def test_failed_index_is_retried_until_the_backoff_limit() -> None:
    job = _job(completionMode="Indexed", completions=1, backoffLimit=1)
    assert plan_job(job, [_pod(0, "Failed")], NOW).create == [0]
    plan = plan_job(job, [_pod(0, "Failed"), _pod(0, "Failed")], NOW)
    assert plan.create == [] and plan.status["conditions"][-1]["reason"] == "BackoffLimitExceeded"


def test_complete_and_ttl() -> None:
    job = _job(completions=2, parallelism=2, ttlSecondsAfterFinished=5)
    plan = plan_job(job, [_pod(None, "Succeeded"), _pod(None, "Succeeded")], NOW)
    assert plan.status["conditions"][-1]["type"] == "Complete" and plan.status["active"] == 0
    job["status"] = plan.status
    assert not plan_job(job, [], NOW + dt.timedelta(seconds=4)).expired
    assert plan_job(job, [], NOW + dt.timedelta(seconds=5)).expired


def test_active_deadline_deletes_running_pods() -> None:
    job = _job(activeDeadlineSeconds=10)
    job["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    plan = plan_job(job, [_pod(None, "Running")], NOW + dt.timedelta(seconds=11))
    assert plan.delete == ["pNone-Running"] and plan.status["conditions"][-1]["reason"] == "DeadlineExceeded"


def test_pod_for_indexed_job() -> None:
    pod = pod_for(_job(completionMode="Indexed"), 3)
    meta = pod["metadata"]
    assert meta["name"].startswith("j-3-") and meta["annotations"][INDEX_KEY] == "3"
    assert meta["labels"] == {
        "app": "x",
        "batch.kubernetes.io/controller-uid": "uid-1",
        "controller-uid": "uid-1",
        "batch.kubernetes.io/job-name": "j",
        "job-name": "j",
        INDEX_KEY: "3",
    }
    assert meta["ownerReferences"][0] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert pod["spec"]["containers"][0]["env"][-1]["name"] == "JOB_COMPLETION_INDEX"


def test_compress_indexes() -> None:
    assert compress_indexes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"
    assert compress_indexes(set()) == ""


def test_pod_ips_skip_network_gateway_and_broadcast_addresses() -> None:
    from itertools import islice

    from stepscope_local.runner.controller import pod_ips

    assert list(islice(pod_ips("127.0.0.0/23"), 254))[-2:] == ["127.0.0.254", "127.0.1.2"]
    assert next(pod_ips("127.9.0.0/16")) == "127.9.0.2"
