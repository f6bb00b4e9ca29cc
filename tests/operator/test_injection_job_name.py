"""The injected sidecar learns its job's name (the `job_name` label of its step metrics) from the pod's job label, by
fieldRef, for every job kind; a pod of no job gets none."""

from __future__ import annotations

from typing import Any

import pytest

from stepscope_contract.constants import INJECT_LABEL, SIDECAR_CONTAINER_NAME
from stepscope_operator.webhook.injection import InjectionConfig, mutate

pytestmark = pytest.mark.unit


def _sidecar_env(labels: dict[str, str]) -> dict[str, Any]:
    pod = {"metadata": {"labels": {INJECT_LABEL: "true", **labels}}, "spec": {"containers": [{"name": "t"}]}}
    ops = mutate(pod, InjectionConfig())
    added = next(op["value"] for op in ops if op["path"].startswith("/spec/initContainers"))
    sidecar = next(c for c in (added if isinstance(added, list) else [added]) if c["name"] == SIDECAR_CONTAINER_NAME)
    return {e["name"]: e for e in sidecar["env"]}


@pytest.mark.parametrize(
    "label",
    ["job-name", "batch.kubernetes.io/job-name", "training.kubeflow.org/job-name", "jobset.sigs.k8s.io/jobset-name"],
)
def test_the_job_label_becomes_the_sidecars_job_name(label: str) -> None:
    env = _sidecar_env({label: "llama"})
    assert env["STEPSCOPE_JOB_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{label}']"


def test_a_pod_of_no_job_has_no_job_name() -> None:
    assert "STEPSCOPE_JOB_NAME" not in _sidecar_env({"app": "trainer"})
