"""The real operator process against the Kubernetes API emulator over HTTP, with stand-in sidecars that are real
HTTP servers speaking the wire protocol."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from operator_harness import (
    API,
    SIDECAR_TOKEN,
    OperatorProcess,
    add_pod,
    events_with,
    finish_analysis,
    session,
    times_told,
    wait_for,
)
from standin_sidecar import SidecarFleet

from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def _pods(api: EmulatorServer, fleet: SidecarFleet, labels: dict[str, str], job: str | None = None) -> None:
    for i, sidecar in enumerate(fleet.sidecars):
        annotations = {"batch.kubernetes.io/job-completion-index": str(i)} if job else {}
        pod_labels = {**labels, **({"batch.kubernetes.io/job-name": job} if job else {})}
        add_pod(
            api,
            f"train-{i}",
            sidecar.host,
            sidecar.port,
            pod_labels,
            annotations,
            env=None if job else [{"name": "RANK", "value": str(i)}],
            node=f"node-{i % 2}",
        )


def _kubectl(api: EmulatorServer, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/usr/bin/kubectl", "--kubeconfig", str(api.kubeconfig_path), "--cache-dir", str(tmp / "kc"), *args],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )


def test_happy_path_to_succeeded_with_kubectl(api: EmulatorServer, operator: OperatorProcess, tmp_path: Path) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 3, upload_after=0.5) as fleet:
        _pods(api, fleet, {"app": "trainer"})
        api.apply(session("happy", {"selector": {"matchLabels": {"app": "trainer"}}}))
        obj = wait_for(api, "happy", ("Analyzing", "Failed"))
        status = obj["status"]
        assert status["phase"] == "Analyzing", status
        assert status["progress"] == "3/3" and status["counts"]["captured"] == 3
        assert [t["rank"] for t in status["targets"]] == [0, 1, 2]
        assert all(s.requests["start"] == 1 for s in fleet.sidecars)
        job = api.get("batch/v1", "jobs", "default", "happy-analyze")
        assert job is not None
        owner = job["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ProfileSession" and owner["uid"] == obj["metadata"]["uid"] and owner["controller"]
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {
            "name": "AWS_SECRET_ACCESS_KEY",
            "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}},
        } in env
        job_file = tmp_path / "job.yaml"
        job_file.write_text(yaml.safe_dump({k: v for k, v in job.items() if k != "status"}))
        validated = subprocess.run(
            [str(Path(__file__).resolve().parents[2] / ".venv/bin/kubernetes-validate"), "--quiet", str(job_file)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert validated.returncode == 0, validated.stdout + validated.stderr

        finish_analysis(api, "happy")
        waited = _kubectl(api, tmp_path, "wait", "--for=condition=Complete", "profilesession/happy", "--timeout=120s")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        final = wait_for(api, "happy", ("Succeeded", "PartiallySucceeded", "Failed"))
        assert final["status"]["phase"] == "Succeeded", final["status"]
        assert final["status"]["completionTime"]
        table = _kubectl(api, tmp_path, "get", "profilesessions")
        columns = ["NAME", "PHASE", "CAPTURED", "SLOWEST", "CAUSE", "BOTTLENECK", "GATE", "VS", "BASELINE", "AGE"]
        assert table.stdout.split()[:10] == columns, table.stdout
        assert "Succeeded" in table.stdout and "3/3" in table.stdout
        events_with(api, "Succeeded", about="happy")  # the last of them: kopf posts events after the status patch
        reasons = {e.get("reason") for e in api.list("v1", "events", "default")}
        assert {"Capturing", "Analyzing", "Succeeded"} <= reasons, reasons


def test_sharded_analysis_goes_map_then_reduce_by_its_status_stage(
    api: EmulatorServer, operator: OperatorProcess
) -> None:
    """The stage is a status field (analysisStage), not read back from the Job's name."""
    with SidecarFleet(SIDECAR_TOKEN, 3, upload_after=0.5, base="127.0.13.") as fleet:
        _pods(api, fleet, {"app": "sharded"})
        body = session("sharded", {"selector": {"matchLabels": {"app": "sharded"}}})
        body["spec"]["analysis"] = {"shards": 2}
        api.apply(body)
        status = wait_for(api, "sharded", ("Analyzing", "Failed"))["status"]
        assert (status["analyzerJob"], status["analysisStage"]) == ("sharded-analyze-map", "Map"), status
        job = api.get("batch/v1", "jobs", "default", "sharded-analyze-map")
        assert job is not None and job["spec"]["completions"] == 2
        api.patch_status("batch/v1", "jobs", "default", "sharded-analyze-map",
                         {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]})  # fmt: skip
        deadline = time.monotonic() + 60
        while (api.get(API, "profilesessions", "default", "sharded") or {})["status"].get("analysisStage") != "Reduce":
            assert time.monotonic() < deadline, "no reduce stage"
            time.sleep(0.2)
        status = api.get(API, "profilesessions", "default", "sharded")["status"]  # type: ignore[index]
        assert status["analyzerJob"] == "sharded-analyze-reduce" and status["phase"] == "Analyzing"
        reduce_job = api.get("batch/v1", "jobs", "default", "sharded-analyze-reduce")
        assert reduce_job is not None and "--shards" in reduce_job["spec"]["template"]["spec"]["containers"][0]["args"]


def test_invalid_spec_fails_naming_the_field(api: EmulatorServer, operator: OperatorProcess) -> None:
    # A backwards range passes the CRD's rules (a regular expression cannot order numbers); the operator names it.
    api.apply(session("invalid", {"selector": {"matchLabels": {"app": "x"}}, "ranks": "0-3,7-5"}))
    status = wait_for(api, "invalid", ("Failed",))["status"]
    accepted = next(c for c in status["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "False" and accepted["reason"] == "InvalidSpec"
    assert "spec.targets.ranks" in status["message"] and "7-5" in status["message"], status
    assert times_told(status, status["message"]) == 1, status  # the conditions carry the reason, not the why


def test_no_matching_pods_says_what_was_searched(api: EmulatorServer, operator: OperatorProcess) -> None:
    api.apply(session("nopods", {"selector": {"matchLabels": {"app": "nothing-here"}}, "waitSeconds": 2}))
    status = wait_for(api, "nopods", ("Failed",))["status"]
    assert "app=nothing-here" in status["message"] and "namespace default" in status["message"], status
    assert "waited 2s" in status["message"], status


def test_job_reference_and_one_sidecar_down(api: EmulatorServer, operator: OperatorProcess) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 3, upload_after=0.5, base="127.0.10.") as fleet:
        _pods(api, fleet, {"app": "other"}, job="ddp")
        fleet.kill(1)
        api.apply(session("jobref", {"jobRef": {"kind": "Job", "name": "ddp"}}))
        obj = wait_for(api, "jobref", ("Analyzing", "Failed"))
        targets = {t["rank"]: t for t in obj["status"]["targets"]}
        assert sorted(targets) == [0, 1, 2]  # ranks from the Job completion index
        assert targets[1]["state"] == "Failed" and "unreachable" in targets[1]["message"], targets[1]
        assert targets[0]["state"] == targets[2]["state"] == "Captured"
        finish_analysis(api, "jobref")
        final = wait_for(api, "jobref", ("Succeeded", "PartiallySucceeded", "Failed"))
        assert final["status"]["phase"] == "PartiallySucceeded", final["status"]
        assert "train-1" in final["status"]["message"]
        assert times_told(final["status"], "train-1") == 1, final["status"]  # Captured keeps only its count


def test_restart_during_capture_sends_no_duplicate_starts(api: EmulatorServer, tmp_path: Path) -> None:
    op = OperatorProcess(api, tmp_path)
    op.start()
    try:
        with SidecarFleet(SIDECAR_TOKEN, 3, upload_after=6.0, base="127.0.11.") as fleet:
            _pods(api, fleet, {"app": "restart"})
            api.apply(session("restart", {"selector": {"matchLabels": {"app": "restart"}}}))
            wait_for(api, "restart", ("Capturing",))
            deadline = time.monotonic() + 120
            while sum(s.requests["start"] for s in fleet.sidecars) < 3:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            op.kill(signal.SIGKILL)
            op.start()
            obj = wait_for(api, "restart", ("Analyzing", "Failed"))
            assert obj["status"]["phase"] == "Analyzing", obj["status"]
            assert [s.requests["start"] for s in fleet.sidecars] == [1, 1, 1]
            assert all(s.requests["get"] >= 1 for s in fleet.sidecars)
    finally:
        op.kill(signal.SIGTERM)


def test_delete_during_capture_aborts_and_releases(api: EmulatorServer, operator: OperatorProcess) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 2, upload_after=30.0, base="127.0.12.") as fleet:
        _pods(api, fleet, {"app": "deleted"})
        api.apply(session("deleteme", {"selector": {"matchLabels": {"app": "deleted"}}}))
        obj = wait_for(api, "deleteme", ("Capturing",))
        assert "stepscope.dev/finalizer" in obj["metadata"].get("finalizers", [])
        deadline = time.monotonic() + 120
        while sum(s.requests["start"] for s in fleet.sidecars) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        api.delete(API, "profilesessions", "default", "deleteme")
        deadline = time.monotonic() + 120
        while api.get(API, "profilesessions", "default", "deleteme") is not None:
            assert time.monotonic() < deadline, "the finalizer was never released"
            time.sleep(0.2)
        assert [s.requests["abort"] for s in fleet.sidecars] == [1, 1]
