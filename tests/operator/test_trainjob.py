"""`jobRef: {kind: TrainJob}` (Kubeflow Trainer v2): the real operator resolves a TrainJob to the trainer pods of
its JobSet, with ranks from the Job completion index, and leaves the initializer pods alone; a TrainJob that does not
exist yet is waited for, with a condition saying so."""

from __future__ import annotations

import pytest
from kinds import JOBSET_CRD, TRAINJOB_CRD, jobset_pod_labels, trainjob, trainjob_jobset
from operator_harness import SIDECAR_TOKEN, OperatorProcess, add_pod, session, wait_for
from standin_sidecar import SidecarFleet

from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_trainjob_targets_are_its_trainer_pods_ranked_by_index(api: EmulatorServer, operator: OperatorProcess) -> None:
    api.apply(TRAINJOB_CRD)
    api.apply(JOBSET_CRD)
    api.apply(session("tj", {"jobRef": {"kind": "TrainJob", "name": "llama"}, "waitSeconds": 120}))
    waiting = wait_for(api, "tj", ("Resolving",))["status"]
    resolved = next(c for c in waiting["conditions"] if c["type"] == "TargetsResolved")
    assert resolved["reason"] == "WaitingForTargets" and "TrainJob llama does not exist" in resolved["message"]

    with SidecarFleet(SIDECAR_TOKEN, 4, upload_after=0.5, base="127.0.13.") as fleet:
        init, *trainers = fleet.sidecars
        add_pod(api, "llama-init", init.host, init.port, jobset_pod_labels("llama", "dataset-initializer", 0, 0))
        for index, sidecar in reversed(list(enumerate(trainers))):  # created in another order than their ranks
            add_pod(
                api,
                f"llama-node-0-{index}-x{index}",
                sidecar.host,
                sidecar.port,
                jobset_pod_labels("llama", "node", 0, 1),
                {"batch.kubernetes.io/job-completion-index": str(index)},
                node=f"node-{index}",
            )
        api.apply(trainjob("llama", 3))
        api.apply(trainjob_jobset("llama", 3))
        obj = wait_for(api, "tj", ("Analyzing", "Failed"))
        status = obj["status"]
        assert status["phase"] == "Analyzing", status
        assert [(t["rank"], t["pod"]) for t in status["targets"]] == [
            (0, "llama-node-0-0-x0"),
            (1, "llama-node-0-1-x1"),
            (2, "llama-node-0-2-x2"),
        ]
        assert init.requests["start"] == 0  # the dataset initializer is no target
        assert [s.requests["start"] for s in trainers] == [1, 1, 1]
