"""ProfileTriggers end to end on the local cluster: a real 4-rank gloo DDP training whose hooks record step telemetry,
real sidecars serving it, the real operator pulling it, and the analyzer Job of the session the trigger creates.

- A run that is balanced at first, then whose rank 2 slows down twice (two separate slowdowns within the cooldown):
  nothing fires while it is balanced, the first slowdown fires exactly one session, whose report names rank 2 as the
  slow rank; the second slowdown is suppressed by the cooldown (an Event says so) and creates nothing.
- A balanced run (every condition on, evaluated every 2 s over three times what straggler and stall must hold before
  they fire) fires nothing the machine's own measured speed does not explain (a step-time regression while the
  machine itself was as much slower). The several-minute balanced soak is `bench/trigger_soak.py` (`make bench`), kept
  out of `make test` for its cost.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any
from typing import Any as Env

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trigger_manifests import API, EVALUATION_INTERVAL_S, write_trigger

from stepscope_testing.machine_speed import SpeedProbe, explained

pytestmark = [pytest.mark.e2e, pytest.mark.solo, pytest.mark.timeout(600)]


def apply_trigger(env: Env, name: str, job: str, conditions: dict[str, Any], cooldown: int) -> None:
    path = write_trigger(env.workdir, name, job, conditions, cooldownSeconds=cooldown)
    applied = env.cluster.kubectl("apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr


def status_of(env: Env, name: str) -> dict[str, Any]:
    obj = env.cluster.api.get(API, "profiletriggers", "default", name)
    assert obj is not None
    status: dict[str, Any] = obj.get("status") or {}
    return status


def created_sessions(env: Env, trigger: str) -> list[str]:
    sessions = env.cluster.api.list(API, "profilesessions", "default", f"stepscope.dev/trigger={trigger}")
    return sorted(s["metadata"]["name"] for s in sessions)


def log_lines(env: Env, pods: list[dict[str, Any]], text: str) -> int:
    return sum(env.cluster.pod_log("default", p["metadata"]["name"], "trainer").count(text) for p in pods)


def wait(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_a_slowdown_fires_exactly_once_and_the_session_names_the_slowed_rank(e2e: Env) -> None:
    # balanced for 400 steps, then rank 2 is slow for 250 steps, balanced for 250, slow again, ...
    extra = {"SLOW_AFTER_STEPS": "400", "SLOW_FOR_STEPS": "250"}
    e2e.start_training("trig-train", slow_rank=2, mode="host", slow_ms=60.0, extra_env=extra)
    try:
        pods = e2e.ready_pods("trig-train")
        conditions = {"straggler": {"forSeconds": 10}, "stall": {"seconds": 120}}
        apply_trigger(e2e, "trig", "trig-train", conditions, cooldown=900)
        wait("a first evaluation", lambda: status_of(e2e, "trig").get("lastEvaluationTime"), 120)
        wait("the slowdown", lambda: log_lines(e2e, pods, "slows down at step"), 300)
        assert created_sessions(e2e, "trig") == [], status_of(e2e, "trig")  # nothing while it was balanced
        status = wait("the trigger to fire", lambda: (s := status_of(e2e, "trig")).get("sessionCount") and s, 180)
        assert status["lastFiredCondition"] == "Straggler", status
        assert status["lastFiredReason"].startswith("rank 2's own time"), status
        (name,) = created_sessions(e2e, "trig")
        obj = e2e.wait_phase(name, timeout=300)
        assert obj["status"]["phase"] in ("Succeeded", "PartiallySucceeded"), obj["status"]
        assert obj["metadata"]["ownerReferences"][0]["name"] == "trig"
        report = e2e.report(obj)
        slow = [s["rank"] for s in report["diagnosis"]["slow_ranks"]]
        assert slow == [2], report["diagnosis"]["verdict"]
        assert obj["status"]["summary"]["slowestRank"] == 2

        # back to normal, then slow again: a new slowdown within the cooldown is reported, not profiled
        wait("the second slowdown", lambda: log_lines(e2e, pods, "slows down at step") >= 2, 300)
        suppressed = wait(
            "the cooldown to suppress it",
            lambda: [
                e
                for e in e2e.cluster.api.list("v1", "events", "default")
                if (e.get("involvedObject") or {}).get("name") == "trig" and e.get("reason") == "Suppressed"
            ],
            120,
        )
        assert "cooling down until" in suppressed[0]["message"], suppressed
        seen = status_of(e2e, "trig").get("lastEvaluationTime")
        later = wait(
            "a later evaluation", lambda: (t := status_of(e2e, "trig").get("lastEvaluationTime")) != seen and t, 60
        )
        wait("one more evaluation", lambda: status_of(e2e, "trig").get("lastEvaluationTime") not in (seen, later), 60)
        assert created_sessions(e2e, "trig") == [name]
        assert status_of(e2e, "trig")["sessionCount"] == 1
    finally:
        e2e.stop_training("trig-train")


REGRESSION = re.compile(r"is [0-9.]+ ms, ([0-9.]+)x its baseline")
RECENT_STEPS, BASELINE_STEPS = 20, 200  # the stepTimeRegression the balanced run's trigger judges with


def machine_explains(probe: SpeedProbe, at: float, status: dict[str, Any]) -> str:
    """Why a StepTimeRegression the balanced run's trigger reported at `at` is (or is not) the machine's own slowdown
    over the same steps: '' when the probe measured it, else what it measured."""
    match = REGRESSION.search(status.get("message") or "")
    step_s = ((status.get("observed") or {}).get("medianStepMs") or 100.0) / 1000.0
    if match is None:
        return f"no ratio in the message {status.get('message')!r}"
    span = max(1.0, RECENT_STEPS * step_s)  # the recent steps, in seconds
    recent_start = at - span - 4.0  # the evaluation lags the steps by up to two intervals
    baseline = (recent_start - max(10.0, BASELINE_STEPS * step_s), recent_start)
    machine = probe.slowdown((recent_start, at), baseline, span)
    job = float(match.group(1))
    if machine is not None and explained(job, machine):
        return ""
    return f"the job was {job:.2f}x its baseline, the machine {machine or float('nan'):.2f}x"


HOLD_S = 10  # the balanced run's straggler forSeconds and stall seconds
SOAK_S = 3 * HOLD_S


def every_condition_judged(status: dict[str, Any]) -> bool:
    """Whether the last evaluation judged every condition: no note of one that lacked steps ("no condition holds
    (straggler: ... needed)") and no evaluation yet are the two ways it did not."""
    message = str(status.get("message") or "")
    return bool(status.get("lastEvaluationTime")) and bool(message) and not message.startswith("no condition holds (")


def test_a_balanced_run_fires_nothing(e2e: Env) -> None:
    """Straggler and stall compare ranks with each other and with a fixed time: they never fire. A step-time
    regression is the job against its own past, which a busy machine really does slow down: it may only fire while
    the machine's own measured speed (SpeedProbe) fell as much, and a session may come only from such an episode.

    The soak starts once an evaluation judged every condition (each rank's straggler window and the regression's
    baseline are full) and lasts three times HOLD_S, the straggler's forSeconds and the stall's seconds here: every
    evaluation in it judges every condition, and a false straggler or stall would fire a session within the soak. A
    rank that the busy machine slows for a few steps may make the straggler hold (the status says so, as it should);
    it must not fire, and the trigger's window of recent steps moves on by
    evaluations every EVALUATION_INTERVAL_S seconds; the test requires more than half of the evaluations the soak can
    hold. The regression's own forSeconds (its default) is longer than the soak: its judgement is checked evaluation
    by evaluation, the sessions it may fire are the long soak's (`bench/trigger_soak.py`)."""
    with SpeedProbe(period=0.1) as probe:
        e2e.start_training("calm-train", slow_rank=-1)
        try:
            e2e.ready_pods("calm-train")
            regression = {"thresholdPercent": 50, "steps": RECENT_STEPS, "baselineSteps": BASELINE_STEPS}
            conditions = {
                "straggler": {"forSeconds": HOLD_S},
                "stepTimeRegression": regression,
                "stall": {"seconds": HOLD_S},
            }
            apply_trigger(e2e, "calm", "calm-train", conditions, cooldown=0)
            wait("telemetry", lambda: (status_of(e2e, "calm").get("observed") or {}).get("ranks") == 4, 120)
            wait("an evaluation of every condition", lambda: every_condition_judged(status_of(e2e, "calm")), 120)
            began = time.monotonic()
            evaluations = set()
            unexplained, explained_by_machine, held = [], [], []
            while time.monotonic() - began < SOAK_S:
                status = status_of(e2e, "calm")
                if every_condition_judged(status):
                    evaluations.add(status.get("lastEvaluationTime"))
                if status.get("condition") == "StepTimeRegression":
                    why = machine_explains(probe, time.monotonic(), status)
                    (unexplained if why else explained_by_machine).append(why or status.get("message"))
                elif status.get("condition") != "None":
                    assert not status.get("episodeFired"), status
                    held.append(str(status.get("message")))
                time.sleep(1)
            assert unexplained == [], unexplained
            print(f"step-time regressions the machine's own slowdown explained: {explained_by_machine}")
            print(f"conditions that held for a moment and did not last their hold: {held}")
            assert len(evaluations) > SOAK_S / EVALUATION_INTERVAL_S / 2, evaluations  # the trigger kept evaluating
            fired = {s.get("condition") for s in status_of(e2e, "calm").get("sessions") or []}
            assert fired <= {"StepTimeRegression"}, fired
        finally:
            e2e.stop_training("calm-train")
