"""Unit tests of JobSet/TrainJob rank layouts, the wait for starting pods, and the install's storage defaults."""

from __future__ import annotations

from typing import Any

import pytest

from stepscope_contract.session import StorageSpec, TargetSpec
from stepscope_contract.session_folder import link_url
from stepscope_contract.storage import AddressingStyle
from stepscope_contract.storage_defaults import StorageDefaults
from stepscope_operator.session.targets import candidate_selectors, jobset_layout, pod_rank, resolve_targets

pytestmark = pytest.mark.unit


def _rj(name: str, replicas: int, pods: int, step: str | None = None) -> dict[str, Any]:
    labels = {"trainer.kubeflow.org/trainjob-ancestor-step": step} if step else {}
    return {
        "name": name,
        "replicas": replicas,
        "template": {"metadata": {"labels": labels}, "spec": {"parallelism": pods}},
    }


def _pod(rj: str, job_index: int, completion: int, phase: str = "Running", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{rj}-{job_index}-{completion}",
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": rj, "jobset.sigs.k8s.io/job-index": str(job_index)},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(completion)},
        },
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": phase, "podIP": "10.0.0.9", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def test_jobset_ranks_count_jobs_and_pods_in_order() -> None:
    layout = jobset_layout({"spec": {"replicatedJobs": [_rj("driver", 1, 1), _rj("workers", 2, 4)]}})
    assert pod_rank(_pod("driver", 0, 0), layout=layout) == 0
    assert pod_rank(_pod("workers", 0, 3), layout=layout) == 4
    assert pod_rank(_pod("workers", 1, 2), layout=layout) == 7


def test_trainjob_layout_keeps_only_the_trainer_steps() -> None:
    jobset = {
        "spec": {
            "replicatedJobs": [
                _rj("dataset-initializer", 1, 1, "dataset-initializer"),
                _rj("model-initializer", 1, 1, "model-initializer"),
                _rj("node", 1, 4, "trainer"),
            ]
        }
    }
    layout = jobset_layout(jobset, trainer_only=True)
    spec = TargetSpec.model_validate({"jobRef": {"kind": "TrainJob", "name": "t"}})
    pods = [_pod("dataset-initializer", 0, 0), *(_pod("node", 0, i) for i in (3, 1, 0, 2))]
    resolution = resolve_targets(pods, spec, "s", layout)
    assert [(t.pod, t.rank) for t in resolution.targets] == [(f"node-0-{i}", i) for i in range(4)]
    assert candidate_selectors(spec) == ["jobset.sigs.k8s.io/jobset-name=t"]
    unlabelled = jobset_layout({"spec": {"replicatedJobs": [_rj("init", 1, 1), _rj("node", 1, 2)]}}, trainer_only=True)
    assert set(unlabelled.first_ranks) == {"node"}


def test_starting_pods_are_counted() -> None:
    spec = TargetSpec.model_validate({"selector": {"matchLabels": {"a": "b"}}})
    pods = [_pod("n", 0, 0), _pod("n", 0, 1, ready=False), _pod("n", 0, 2, phase="Pending"), _pod("n", 0, 3, "Failed")]
    resolution = resolve_targets(pods, spec, "s")
    assert len(resolution.targets) == 1 and resolution.starting == 2


def test_storage_defaults_fill_only_what_is_missing() -> None:
    defaults = StorageDefaults.from_env(
        {
            "STEPSCOPE_STORAGE_ENDPOINT": "http://s3.local:9000",
            "STEPSCOPE_STORAGE_REGION": "eu-1",
            "STEPSCOPE_STORAGE_ADDRESSING_STYLE": "path",
            "STEPSCOPE_STORAGE_CREDENTIALS_SECRET": "install-keys",
            "STEPSCOPE_STORAGE_URL_BASE": "https://reports.example.com/p",
        }
    )
    bare = defaults.apply(StorageSpec(uri="s3://bucket/p"))
    assert (bare.endpoint, bare.region, bare.addressing_style) == ("http://s3.local:9000", "eu-1", AddressingStyle.PATH)
    assert bare.url_base == "https://reports.example.com/p"
    assert (
        link_url("s3://bucket/p/ns/s-1/report/diff.html", bare)
        == "https://reports.example.com/p/ns/s-1/report/diff.html"
    )
    assert link_url("s3://other/x/report.html", bare) == "s3://other/x/report.html"  # not under storage.uri: as it is
    assert bare.credentials_secret is not None and bare.credentials_secret.name == "install-keys"
    own = StorageSpec.model_validate(
        {
            "uri": "s3://bucket/p",
            "endpoint": "https://mine",
            "addressingStyle": "virtual",
            "credentialsSecret": {"name": "m"},
            "urlBase": "https://mine.example.com",
        }
    )
    kept = defaults.apply(own)
    assert kept.url_base == "https://mine.example.com"
    assert (kept.endpoint, kept.addressing_style, kept.region) == ("https://mine", AddressingStyle.VIRTUAL, "eu-1")
    assert kept.credentials_secret is not None and kept.credentials_secret.name == "m"
    local = StorageSpec(uri="file:///data")
    assert defaults.apply(local) is local
    # oss:// with only its region: the endpoint stays derived from the region (stepscope_storage), not the install's
    oss = defaults.apply(StorageSpec(uri="oss://bucket/p", region="cn-hangzhou"))
    assert (oss.endpoint, oss.region) == (None, "cn-hangzhou")
    assert oss.credentials_secret is not None and oss.credentials_secret.name == "install-keys"
    assert defaults.apply(StorageSpec(uri="oss://bucket/p")).endpoint == "http://s3.local:9000"  # no region: install's
    with pytest.raises(ValueError, match="ADDRESSING_STYLE"):
        StorageDefaults.from_env({"STEPSCOPE_STORAGE_ADDRESSING_STYLE": "sideways"})
