"""A training container killed mid-capture (what an OOM kill does), with the real operator: the test plays the
kubelet (the pod's status shows the container terminated with its reason and exit code) while stand-in sidecars
keep the capture waiting, as a sidecar whose hook died with its process does.

- the rank ends as Crashed with the container's reason and exit code long before the capture deadline, and its
  sidecar's capture is aborted;
- when nothing else is left to analyse, the session fails naming the rank that crashed first (RankCrashed).
"""

from __future__ import annotations

import time

import pytest
from operator_harness import SIDECAR_TOKEN, OperatorProcess, add_pod, events_with, session, wait_for
from standin_sidecar import SidecarFleet

from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
API = "stepscope.dev/v1alpha1"


def _kill_trainer(api: EmulatorServer, pod: str, reason: str, code: int) -> None:
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    terminated = {"exitCode": code, "reason": reason, "startedAt": finished, "finishedAt": finished}
    api.patch_status(
        "v1",
        "pods",
        "default",
        pod,
        {
            "containerStatuses": [{"name": "trainer", "ready": False, "state": {"terminated": terminated}}],
            "conditions": [{"type": "Ready", "status": "False"}],
        },
    )


def _target(api: EmulatorServer, name: str, pod: str) -> dict[str, str]:
    obj = api.get(API, "profilesessions", "default", name) or {}
    return next((t for t in (obj.get("status") or {}).get("targets") or [] if t["pod"] == pod), {})


def _wait_target(api: EmulatorServer, name: str, pod: str, state: str, timeout: float) -> dict[str, str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        target = _target(api, name, pod)
        if target.get("state") == state:
            return target
        time.sleep(0.2)
    raise AssertionError(f"{pod} never became {state}: {api.get(API, 'profilesessions', 'default', name)}")


def test_a_killed_trainer_ends_its_rank_and_names_it(api: EmulatorServer, operator: OperatorProcess) -> None:
    # the stand-ins would upload only after 10 minutes: the capture waits as it does for a dead hook
    with SidecarFleet(SIDECAR_TOKEN, 2, upload_after=600, base="127.0.31.") as fleet:
        for i, sidecar in enumerate(fleet.sidecars):
            add_pod(
                api, f"oom-{i}", sidecar.host, sidecar.port, {"app": "oom"}, env=[{"name": "RANK", "value": str(i)}]
            )
        api.apply(session("oom", {"selector": {"matchLabels": {"app": "oom"}}}, timeoutSeconds=600,
                          stepTimeoutSeconds=30))  # fmt: skip
        wait_for(api, "oom", ("Capturing",))
        _kill_trainer(api, "oom-1", "OOMKilled", 137)
        # well within stepTimeoutSeconds + 15 s; the capture deadline is 10 minutes away
        crashed = _wait_target(api, "oom", "oom-1", "Crashed", timeout=45)
        assert crashed["message"] == "training container trainer terminated: OOMKilled (exit code 137, SIGKILL)"
        assert _target(api, "oom", "oom-0")["state"] in ("Signalled", "Capturing"), "the other rank goes on"
        end = time.monotonic() + 20
        while not fleet.sidecars[1].requests["abort"] and time.monotonic() < end:
            time.sleep(0.2)
        assert fleet.sidecars[1].requests["abort"] == 1 and not fleet.sidecars[0].requests["abort"]
        _kill_trainer(api, "oom-0", "Error", 1)  # the peer's collective fails and its process exits in turn
        final = wait_for(api, "oom", ("Succeeded", "PartiallySucceeded", "Failed"), timeout=45)
    status = final["status"]
    assert status["phase"] == "Failed", status
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "RankCrashed", failed
    assert status["message"].startswith(
        "rank 1 (pod oom-1) crashed: training container trainer terminated: OOMKilled (exit code 137, SIGKILL) "
        "(and 1 more crashed)"
    ), status["message"]
    assert status["counts"]["failed"] == 2 and status["progress"] == "0/2"
    reasons = [e["reason"] for e in events_with(api, "RankCrashed", at_least=2)]
    assert len(reasons) == 2, reasons
