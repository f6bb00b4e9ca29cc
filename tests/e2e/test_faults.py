"""Faults injected into one 4-rank training on the local cluster, with the real operator, sidecars, hook and analyzer;
each ends in a truthful final status and loses nothing that was captured:

- the object store down for 20 s while the ranks upload, and the API server for the first 10 s of it: every upload
  is sent again once storage is back, the operator carries on once the API is (`Succeeded 4/4`), and what was stored
  before the outage is still there;
- a training process SIGKILLed mid-capture (what an OOM kill does): its rank ends as Crashed with the container's
  reason and exit code long before the capture deadline, and the session ends naming it (or goes on with what the
  others uploaded); everything a target says it uploaded is in storage.

The other faults stay covered where they were: a killed sidecar (test_scenarios), the object store down for a
whole session (test_scenarios), a killed operator (tests/operator/test_lifecycle, tests/localcluster/test_restart),
a failed analyzer Job (tests/operator/test_analysis_outcome).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any as Env

import pytest

from stepscope_local.manifests import s3_location

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
TRAINING = "ddp-faults"
OUTAGE_SECONDS = 20.0


def _stored(e2e: Env, uri: str) -> bool:
    bucket, key = s3_location(uri)
    found = e2e.cluster.s3.client().list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount", 0)
    return bool(found)


@pytest.fixture(scope="module")
def training(e2e: Env) -> Iterator[Env]:
    e2e.start_training(TRAINING, slow_rank=-1, input_bound=True)
    pods = [p["metadata"]["name"] for p in e2e.ready_pods(TRAINING)]
    deadline = time.monotonic() + 180  # every rank past its rendezvous and stepping
    while not all(f"rank {i} step " in e2e.cluster.pod_log("default", pod, "trainer") for i, pod in enumerate(pods)):
        assert time.monotonic() < deadline, "the training never stepped"
        time.sleep(0.5)
    yield e2e
    e2e.stop_training(TRAINING)


def test_a_storage_outage_during_uploads_loses_nothing(training: Env) -> None:
    e2e = training
    s3 = e2e.cluster.s3
    earlier = "sessions/before-the-outage.json"
    s3.client().put_object(Bucket="stepscope-demo", Key=earlier, Body=b"{}")
    e2e.cluster.s3_stop(keep_objects=True)
    try:
        # a 6-step window on CPU takes seconds: the uploads start while storage is down and retry through it
        e2e.apply_session("outage", TRAINING, timeoutSeconds=120)
        e2e.wait_phase("outage", phases=("Capturing", "Uploading"), timeout=60)
        e2e.cluster.api.set_unavailable(True)
        time.sleep(OUTAGE_SECONDS / 2)
        e2e.cluster.api.set_unavailable(False)
        time.sleep(OUTAGE_SECONDS / 2)
    finally:
        e2e.cluster.api.set_unavailable(False)
        e2e.cluster.s3_start()
    obj = e2e.wait_phase("outage", timeout=200)
    status = obj["status"]
    assert status["phase"] == "Succeeded" and status["progress"] == "4/4", status
    report = e2e.report(obj)
    assert sorted(r["rank"] for r in report["ranks"] if r["status"] == "ok") == [0, 1, 2, 3], report["ranks"]
    assert all(_stored(e2e, t["artifactUri"]) for t in status["targets"]), status["targets"]
    assert _stored(e2e, f"s3://stepscope-demo/{earlier}")
    log = "".join(e2e.cluster.pod_log("default", t["pod"], "stepscope-sidecar") for t in status["targets"])
    assert "round 2 in" in log, "no upload was sent again: the outage missed the uploads"


def test_a_killed_trainer_ends_its_rank_in_seconds(training: Env) -> None:
    e2e = training
    pods = e2e.ready_pods(TRAINING)
    victim = pods[1]["metadata"]["name"]
    # many warm-up steps: the trainer dies while the capture waits for its window; the deadline is minutes away
    e2e.apply_session("crash", TRAINING, skipSteps=200, stepTimeoutSeconds=10, timeoutSeconds=300)
    e2e.wait_phase("crash", phases=("Capturing",), timeout=120)
    assert e2e.cluster.kill_container("default", victim, "trainer")
    killed = time.monotonic()
    # within stepTimeoutSeconds + 15 s of the kill, not at the capture deadline
    while not any(t["state"] == "Crashed" for t in e2e.session("crash")["status"]["targets"]):
        assert time.monotonic() - killed < 25, e2e.session("crash")["status"]
        time.sleep(0.3)
    # the others' collectives fail (or, where they stand waiting for it, they are hung after stepTimeoutSeconds):
    # their stacks and Flight Recorder dumps go up and are analysed
    obj = e2e.wait_phase("crash", timeout=150)
    status = obj["status"]
    crashed = [t for t in status["targets"] if t["state"] == "Crashed"]
    assert [t["pod"] for t in crashed] == [victim], status["targets"]
    assert crashed[0]["message"] == "training container trainer terminated: Error (exit code 137, SIGKILL)"
    if status["phase"] == "Failed":
        failed = next(c for c in status["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "RankCrashed" and status["message"].startswith(f"rank 1 (pod {victim}) crashed")
    else:  # what the others uploaded was analysed, and the message names the crash
        assert status["phase"] == "PartiallySucceeded", status
        assert f"{victim} (rank 1): Crashed: training container trainer" in status["message"], status["message"]
        report = e2e.report(obj)
        evidence = {r["rank"] for r in report["ranks"] if r.get("flight_recorder_uri") or r.get("stacks_uri")}
        assert evidence == {0, 2, 3}, report["ranks"]
        assert "rank 1" in report["diagnosis"]["verdict"] or "ranks 0, 1" in report["diagnosis"]["verdict"]
    uploaded = [t["artifactUri"] for t in status["targets"] if t.get("artifactUri")]
    assert len(uploaded) == 3 and all(_stored(e2e, uri) for uri in uploaded), status["targets"]
