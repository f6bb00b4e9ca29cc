"""ProfileTriggers with the real operator process against the API emulator over HTTP, and stand-in sidecars (real HTTP
servers speaking the wire protocol) serving synthetic step telemetry (tests/operator/step_series.py):

- a straggler fires once: an owned, labelled, annotated ProfileSession runs on the same pods, the trigger's status
  says when, why and which session, an Event says so, `kubectl get profiletriggers` shows condition, last fired and
  sessions; later evaluations of the same slowdown create nothing; once the session finished, the history limit 0
  deletes it; deleting the trigger deletes its sessions;
- balanced telemetry fires nothing and the status shows what the operator saw;
- pods whose sidecars serve no telemetry give TelemetryAvailable=False and a Warning, not a crash;
- a stall fires a session whose hooks declare the hang at once (stepTimeoutSeconds at most the stall's seconds).
- an evaluation that an API outage fails runs again within seconds of the outage's end, not a minute later.
"""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from operator_harness import API, SIDECAR_TOKEN, OperatorProcess, add_pod, events_with
from standin_sidecar import SidecarFleet
from step_series import job

from stepscope_contract.step_telemetry import PodSteps, RankSteps
from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


@pytest.fixture
def operator(api: EmulatorServer, tmp_path: Path) -> Any:
    proc = OperatorProcess(api, tmp_path, extra_env={"STEPSCOPE_TRIGGER_TICK_SECONDS": "0.3"})
    proc.start()
    yield proc
    proc.kill()


def trigger(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ProfileTrigger",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "targets": {"selector": {"matchLabels": {"app": "trainer"}}},
            "conditions": {"straggler": {"thresholdPercent": 50, "steps": 20, "forSeconds": 0}},
            "evaluationIntervalSeconds": 1,
            "cooldownSeconds": 0,
            "sessionTemplate": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "capture": {"steps": 3, "timeoutSeconds": 180},
                    "storage": {"uri": "s3://bucket/prefix", "credentialsSecret": {"name": "s3-creds"}},
                },
            },
            **spec,
        },
    }


def serve(fleet: SidecarFleet, api: EmulatorServer, ranks: list[RankSteps]) -> None:
    for i, sidecar in enumerate(fleet.sidecars):
        sidecar.steps = PodSteps(pod=f"train-{i}", ranks=[ranks[i]])
        add_pod(
            api, f"train-{i}", sidecar.host, sidecar.port, {"app": "trainer"}, env=[{"name": "RANK", "value": str(i)}]
        )


def get_trigger(api: EmulatorServer, name: str) -> dict[str, Any]:
    obj = api.get(API, "profiletriggers", "default", name)
    assert obj is not None
    return obj


def wait_status(api: EmulatorServer, name: str, check: Any, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = get_trigger(api, name).get("status") or {}
        if check(status):
            return status
        time.sleep(0.2)
    raise AssertionError(f"{name}: {status}")


def sessions(api: EmulatorServer) -> list[dict[str, Any]]:
    return api.list(API, "profilesessions", "default")


def test_a_straggler_fires_one_owned_session(api: EmulatorServer, operator: OperatorProcess, tmp_path: Path) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 4, upload_after=0.5) as fleet:
        serve(fleet, api, job(1, slow_rank=2, slow_ms=60.0, slow_from=250))
        api.apply(trigger("watch", failedSessionsHistoryLimit=0))
        status = wait_status(api, "watch", lambda s: s.get("sessionCount") == 1)
        assert status["lastFiredCondition"] == "Straggler" and status["condition"] == "Straggler"
        assert status["lastFiredReason"].startswith("rank 2's own time over its last 20 steps")
        (fired,) = status["sessions"]
        assert fired["name"] == "watch-1" and fired["condition"] == "Straggler"
        trig = get_trigger(api, "watch")
        (session,) = sessions(api)
        meta = session["metadata"]
        assert meta["name"] == "watch-1" and meta["labels"] == {"team": "a", "stepscope.dev/trigger": "watch"}
        assert meta["annotations"]["stepscope.dev/trigger-condition"] == "Straggler"
        (owner,) = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "ProfileTrigger",
            "watch",
            trig["metadata"]["uid"],
            True,
        )
        assert session["spec"]["targets"] == {"selector": {"matchLabels": {"app": "trainer"}}} | {
            k: session["spec"]["targets"][k] for k in session["spec"]["targets"] if k != "selector"
        }
        fired_events = events_with(api, "Fired", about="watch")
        assert len(fired_events) == 1 and "created ProfileSession watch-1" in fired_events[0]["message"]

        # the session runs on the same pods (the stand-ins capture it); the slowdown goes on: nothing new fires
        deadline = time.monotonic() + 60
        while (sessions(api) or [{}])[0].get("status", {}).get("phase") not in ("Analyzing", "Failed"):
            assert time.monotonic() < deadline, sessions(api)
            time.sleep(0.3)
        assert all(s.requests["start"] == 1 for s in fleet.sidecars)
        time.sleep(3)  # several evaluations of the same episode
        assert [s["metadata"]["name"] for s in sessions(api)] == ["watch-1"]
        assert "was profiled by watch-1" in get_trigger(api, "watch")["status"]["message"]

        table = subprocess.run(
            [
                "/usr/bin/kubectl",
                "--kubeconfig",
                str(api.kubeconfig_path),
                "--cache-dir",
                str(tmp_path / "kc"),
                "get",
                "profiletriggers",
            ],
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )
        assert table.returncode == 0, table.stderr
        header, row = table.stdout.splitlines()[:2]
        assert header.split() == ["NAME", "CONDITION", "LAST", "FIRED", "SESSIONS", "AGE"], table.stdout
        assert row.split()[:2] == ["watch", "Straggler"] and row.split()[3] == "1", table.stdout

        # the session ends (failed): failedSessionsHistoryLimit 0 deletes it, and the trigger remembers it was
        api.patch_status(API, "profilesessions", "default", "watch-1", {"phase": "Failed"})
        wait_status(api, "watch", lambda s: s["sessions"][0].get("phase") == "Deleted" and not s.get("activeSession"))
        deadline = time.monotonic() + 60
        while sessions(api):
            assert time.monotonic() < deadline, "the session was not deleted"
            time.sleep(0.3)
        assert events_with(api, "SessionsDeleted", about="watch")


def test_deleting_a_trigger_deletes_its_sessions(api: EmulatorServer, operator: OperatorProcess) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 4, upload_after=30) as fleet:
        serve(fleet, api, job(2, slow_rank=1, slow_ms=60.0, slow_from=250))
        api.apply(trigger("doomed"))
        wait_status(api, "doomed", lambda s: s.get("sessionCount") == 1)
        api.delete(API, "profiletriggers", "default", "doomed")
        deadline = time.monotonic() + 90
        while sessions(api) or api.get(API, "profiletriggers", "default", "doomed") is not None:
            assert time.monotonic() < deadline, (sessions(api), operator.log()[-2000:])
            time.sleep(0.3)


def test_balanced_telemetry_fires_nothing_and_missing_telemetry_is_reported(
    api: EmulatorServer, operator: OperatorProcess
) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 4) as fleet:
        serve(fleet, api, job(3))
        api.apply(trigger("quiet", conditions={"straggler": {}, "stepTimeRegression": {}, "stall": {"seconds": 60}}))
        status = wait_status(api, "quiet", lambda s: (s.get("observed") or {}).get("ranks") == 4)
        time.sleep(3)
        status = get_trigger(api, "quiet")["status"]
        assert status["condition"] == "None" and status.get("sessionCount", 0) == 0 and not sessions(api)
        assert status["message"] == "no condition holds"
        assert status["observed"]["podsAnswered"] == 4 and 40 < status["observed"]["medianStepMs"] < 90
        conditions = {c["type"]: c for c in status["conditions"]}
        assert conditions["TelemetryAvailable"]["status"] == "True" and conditions["Accepted"]["status"] == "True"

        for sidecar in fleet.sidecars:
            sidecar.steps = None  # sidecars that serve no telemetry (404)
        status = wait_status(
            api, "quiet", lambda s: {c["type"]: c["status"] for c in s["conditions"]}["TelemetryAvailable"] == "False"
        )
        cond = {c["type"]: c for c in status["conditions"]}["TelemetryAvailable"]
        assert cond["reason"] == "NoTelemetry" and "sidecar answered 404" in cond["message"]
        assert any(e["type"] == "Warning" for e in events_with(api, "NoTelemetry", about="quiet"))
        assert not sessions(api)


def test_a_stall_fires_a_session_that_declares_the_hang_at_once(api: EmulatorServer, operator: OperatorProcess) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 4, upload_after=30) as fleet:
        ranks = job(4, since_last=75.0)
        serve(fleet, api, ranks)
        api.apply(trigger("stalled", conditions={"stall": {"seconds": 60}}))
        status = wait_status(api, "stalled", lambda s: s.get("sessionCount") == 1)
        assert status["lastFiredReason"] == "no step on ranks 0-3 for 75 s (stall.seconds 60)"
        (session,) = sessions(api)
        assert session["spec"]["capture"]["stepTimeoutSeconds"] == 60


def test_an_evaluation_that_fails_runs_again_within_seconds(api: EmulatorServer, operator: OperatorProcess) -> None:
    """An API outage fails the evaluations due during it (every request answered 503); once it ends, the trigger is
    evaluated again within seconds (runtime.config.retry_after), not after kopf's default minute of backoff."""
    with SidecarFleet(SIDECAR_TOKEN, 4) as fleet:
        serve(fleet, api, job(3))
        api.apply(trigger("outage"))
        wait_status(api, "outage", lambda s: "lastEvaluationTime" in s)
        api.set_unavailable(True)
        time.sleep(4)  # evaluations are due every second: the ones in the outage fail
        api.set_unavailable(False)
        ended = datetime.now(UTC)
        status = wait_status(api, "outage", lambda s: _evaluated(s) > ended + timedelta(seconds=1), timeout=30)
        assert status["observed"]["podsAnswered"] == 4, status
    assert "Timer 'evaluate' failed with an exception" in operator.log()  # the outage did fail an evaluation


def _evaluated(status: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(status["lastEvaluationTime"]).replace("Z", "+00:00"))
