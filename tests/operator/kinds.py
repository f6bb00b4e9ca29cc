"""Kubeflow Trainer v2 and JobSet shapes for the operator tests: their CRDs (schemas left open, as only the fields
stepscope reads matter) and a TrainJob with the JobSet its controller would create."""

from __future__ import annotations

from typing import Any


def open_crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


TRAINJOB_CRD = open_crd("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
JOBSET_CRD = open_crd("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")


def trainjob(name: str, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": nodes}},
    }


def trainjob_jobset(name: str, nodes: int) -> dict[str, Any]:
    """The JobSet of a TrainJob with a dataset initializer first, then `nodes` trainer pods in one Indexed Job."""

    def replicated(step: str, job: str, pods: int) -> dict[str, Any]:
        return {
            "name": job,
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed"},
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                replicated("dataset-initializer", "dataset-initializer", 1),
                replicated("trainer", "node", nodes),
            ]
        },
    }


def jobset_pod_labels(jobset: str, replicated_job: str, job_index: int, global_index: int) -> dict[str, str]:
    return {
        "jobset.sigs.k8s.io/jobset-name": jobset,
        "jobset.sigs.k8s.io/replicatedjob-name": replicated_job,
        "jobset.sigs.k8s.io/job-index": str(job_index),
        "jobset.sigs.k8s.io/job-global-index": str(global_index),
        "batch.kubernetes.io/job-name": f"{jobset}-{replicated_job}-{job_index}",
    }
