"""`spec.targets.waitSeconds`: a session applied together with its training job waits, with a condition saying what
it waits for, until the pods exist and are Ready; then it captures them all (not only the first Ready one). A
selector that never matches fails once the wait is over, saying what was searched."""

from __future__ import annotations

import pytest
from operator_harness import SIDECAR_TOKEN, OperatorProcess, add_pod, events_with, session, times_told, wait_for
from standin_sidecar import SidecarFleet

from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _condition(status: dict[str, object], kind: str) -> dict[str, str]:
    return next(c for c in status["conditions"] if c["type"] == kind)  # type: ignore[union-attr, index]


def test_pods_that_come_later_are_waited_for(api: EmulatorServer, operator: OperatorProcess) -> None:
    api.apply(session("early", {"selector": {"matchLabels": {"app": "late"}}, "waitSeconds": 300}))
    status = wait_for(api, "early", ("Resolving",))["status"]
    waiting = _condition(status, "TargetsResolved")
    assert waiting["status"] == "False" and waiting["reason"] == "WaitingForTargets", waiting
    assert "no pod matches" in waiting["message"] and "app=late" in waiting["message"], waiting
    with SidecarFleet(SIDECAR_TOKEN, 2, upload_after=0.5, base="127.0.14.") as fleet:
        first, second = fleet.sidecars
        add_pod(api, "late-0", first.host, first.port, {"app": "late"}, env=[{"name": "RANK", "value": "0"}])
        add_pod(api, "late-1", second.host, second.port, {"app": "late"}, ready=False)
        still = wait_for(api, "early", ("Resolving",))["status"]  # one Ready, one starting: keep waiting
        assert "1 still starting" in _condition(still, "TargetsResolved")["message"] or still["phase"] == "Resolving"
        add_pod(api, "late-1", second.host, second.port, {"app": "late"}, env=[{"name": "RANK", "value": "1"}])
        done = wait_for(api, "early", ("Analyzing", "Failed"))["status"]
        assert done["phase"] == "Analyzing" and done["progress"] == "2/2", done
        assert events_with(api, "WaitingForTargets"), api.list("v1", "events", "default")


def test_nothing_matching_fails_after_the_wait(api: EmulatorServer, operator: OperatorProcess) -> None:
    api.apply(session("never", {"selector": {"matchLabels": {"app": "absent"}}, "waitSeconds": 3}))
    status = wait_for(api, "never", ("Failed",))["status"]
    failed = _condition(status, "TargetsResolved")
    assert failed["reason"] == "NoTargets" and "waited 3s" in status["message"], (failed, status)
    assert times_told(status, status["message"]) == 1, status  # the conditions carry the reason, not the why
