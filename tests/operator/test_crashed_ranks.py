"""A rank whose training container terminated, in the operator's pure parts:

- the training container's termination is read from the pod's status as the kubelet writes it (reason, exit code,
  the signal of an exit code above 128), the sidecar's own container never counts, and `spec.targets.container`
  picks the training container where a pod has several;
- the rank ends as Crashed only while it waits for a step its process will never take, once its sidecar had a few
  seconds to move it on (a rank uploading the error its hook recorded is left to finish);
- Crashed is terminal and counted as failed; once a rank crashed, what the failed ranks uploaded is analysed, and the
  first rank that crashed is named with its pod and why;
- a failed analyzer Job whose earlier attempt wrote the report is said so (the Job's and the session's outcomes).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stepscope_contract.session import TargetState, TargetStatus
from stepscope_operator.session.analyzer_jobs import outcome_disagreement
from stepscope_operator.session.pod_faults import CRASH_GRACE_SECONDS, crashed, sidecar_restarting, training_termination
from stepscope_operator.session.status import count_targets, crash_cause, evidence

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _pod(*statuses: dict[str, Any], containers: tuple[str, ...] = ("trainer", "stepscope-sidecar")) -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": c} for c in containers]},
        "status": {"phase": "Running", "containerStatuses": list(statuses)},
    }


def _ended(name: str, reason: str | None, code: int | None, ago: float = 10.0) -> dict[str, Any]:
    finished = (NOW - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated: dict[str, Any] = {"finishedAt": finished}
    if reason is not None:
        terminated["reason"] = reason
    if code is not None:
        terminated["exitCode"] = code
    return {"name": name, "state": {"terminated": terminated}}


def _running(name: str) -> dict[str, Any]:
    return {"name": name, "state": {"running": {"startedAt": "2026-01-01T11:00:00Z"}}}


def test_the_training_containers_termination_is_read_as_the_kubelet_writes_it() -> None:
    oom = training_termination(_pod(_ended("trainer", "OOMKilled", 137), _running("stepscope-sidecar")))
    assert oom is not None and (oom.container, oom.reason, oom.exit_code) == ("trainer", "OOMKilled", 137)
    assert oom.describe() == "training container trainer terminated: OOMKilled (exit code 137, SIGKILL)"
    error = training_termination(_pod(_ended("trainer", "Error", 1)))
    assert error is not None and error.describe() == "training container trainer terminated: Error (exit code 1)"
    no_reason = training_termination(_pod(_ended("trainer", None, 139)))
    assert no_reason is not None and no_reason.reason == "Error" and "SIGSEGV" in no_reason.describe()
    assert training_termination(_pod(_running("trainer"), _ended("stepscope-sidecar", "Error", 137))) is None
    assert training_termination(_pod(_running("trainer"))) is None
    assert training_termination({}) is None  # a pod that says nothing yet, or is gone


def test_the_named_container_is_the_training_one() -> None:
    pod = _pod(_ended("loader", "Completed", 0), _running("trainer"), containers=("loader", "trainer"))
    assert training_termination(pod, "trainer") is None
    ended = training_termination(pod)
    assert ended is not None and ended.container == "loader" and ended.describe().endswith("Completed (exit code 0)")


@pytest.mark.parametrize(
    ("state", "ago", "expected"),
    [
        (TargetState.CAPTURING, CRASH_GRACE_SECONDS + 1, True),
        (TargetState.SIGNALLED, CRASH_GRACE_SECONDS + 1, True),
        (TargetState.PENDING, CRASH_GRACE_SECONDS + 1, True),
        (TargetState.CAPTURING, 0, False),  # its sidecar may still report the hook's own error
        (TargetState.UPLOADING, 60, False),  # the sidecar is sending what the rank left: let it finish
        (TargetState.FAILED, 60, False),
        (TargetState.CAPTURED, 60, False),
    ],
)
def test_a_rank_crashes_only_while_it_waits_for_a_step(state: TargetState, ago: float, expected: bool) -> None:
    target = TargetStatus(pod="p-1", rank=1, state=state)
    assert crashed(target, training_termination(_pod(_ended("trainer", "OOMKilled", 137, ago))), NOW) is expected
    assert not crashed(target, None, NOW)


def test_crashed_is_terminal_counted_failed_and_named_first() -> None:
    assert TargetState.CRASHED.terminal
    targets = [
        TargetStatus(
            pod="p-0",
            rank=0,
            state=TargetState.FAILED,
            message="gloo: connection reset",
            artifact_uri="s3://b/s/traces/rank0/manifest.json",
        ),
        TargetStatus(
            pod="p-1",
            rank=1,
            state=TargetState.CRASHED,
            last_transition_time=NOW,
            message="training container trainer terminated: OOMKilled (exit code 137, SIGKILL)",
        ),
        TargetStatus(pod="p-2", rank=2, state=TargetState.FAILED, message="sidecar lost"),
        TargetStatus(pod="p-3", rank=3, state=TargetState.CAPTURED, artifact_uri="s3://b/s/traces/rank3.pt.trace.json"),
    ]
    assert count_targets(targets).failed == 3
    # the failed rank that uploaded (its stacks, its Flight Recorder dump) is analysed with the captured one
    assert [t.pod for t in evidence(targets)] == ["p-3", "p-0"]
    assert crash_cause(targets) == (
        "rank 1 (pod p-1) crashed: training container trainer terminated: OOMKilled (exit code 137, SIGKILL)"
    )
    later = TargetStatus(pod="p-2", rank=2, state=TargetState.CRASHED, last_transition_time=NOW + timedelta(seconds=2))
    assert crash_cause([*targets[:2], later]).endswith("(and 1 more crashed)")
    # without a crash, a failed rank is not analysed: its upload says why it failed, not what the job did
    calm = [t for t in targets if t.state is not TargetState.CRASHED]
    assert [t.pod for t in evidence(calm)] == ["p-3"] and crash_cause(calm) == ""


def test_a_failed_job_that_handed_back_a_report_is_said_so() -> None:
    assert outcome_disagreement("s-analyze", "succeeded", "") == ""
    note = outcome_disagreement("s-analyze", "failed", "BackoffLimitExceeded: Job has reached the backoff limit")
    assert note == (
        "analyzer Job s-analyze failed (BackoffLimitExceeded: Job has reached the backoff limit) after an earlier "
        "attempt of it wrote this report"
    )


def _with_sidecar(state: dict[str, Any], native: bool = True, policy: str = "Never") -> dict[str, Any]:
    sidecar = {"name": "stepscope-sidecar", **({"restartPolicy": "Always"} if native else {})}
    spec = {"restartPolicy": policy, "containers": [{"name": "trainer"}]}
    statuses = [{"name": "stepscope-sidecar", "state": state}]
    if native:
        return {"spec": {**spec, "initContainers": [sidecar]}, "status": {"initContainerStatuses": statuses}}
    return {"spec": {**spec, "containers": [{"name": "trainer"}, sidecar]}, "status": {"containerStatuses": statuses}}


def test_a_sidecar_the_kubelet_starts_again_is_not_lost() -> None:
    """While down, a sidecar that comes back (native, or a pod that restarts its containers) is not counted lost: it
    resumes its capture from the hook directory. One that never comes back is."""
    waiting = {"waiting": {"reason": "CrashLoopBackOff"}}
    ended = {"terminated": {"reason": "Error", "exitCode": 137}}
    assert sidecar_restarting(_with_sidecar(waiting))
    assert sidecar_restarting(_with_sidecar(ended, native=False, policy="OnFailure"))
    assert not sidecar_restarting(_with_sidecar(ended, native=False))  # a Job pod's plain container: gone for good
    assert not sidecar_restarting(_with_sidecar({"running": {}}))
    assert not sidecar_restarting({})
