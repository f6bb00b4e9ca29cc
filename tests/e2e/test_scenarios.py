"""Issue 6's end-to-end scenarios on the local cluster, with the real operator, sidecars, hook and analyzer."""

from __future__ import annotations

import importlib.metadata
import re
import time
from collections.abc import Iterator
from typing import Any as Env

import pytest

from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import TRACE_FILE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
BUCKET = "stepscope-demo"  # the e2e cluster's bucket (conftest.BUCKET)
BALANCED = "ddp-balanced"
OSS_BASE = f"oss://{BUCKET}/oss-sessions"


@pytest.fixture(scope="module")
def balanced(e2e: Env) -> Iterator[Env]:
    """One balanced 4-rank training, every rank past its rendezvous and stepping, for the last scenarios of the
    module, which profile a healthy job one session after another (as sessions of one long training are); the one
    that kills a sidecar of it runs last. Its sidecars may upload under two storage bases, the local bucket's and an
    OSS one (OSS_BASE), as a platform that keeps sessions in either would configure them."""
    e2e.start_training(BALANCED, slow_rank=-1, storage_base=f"s3://{BUCKET}/sessions,{OSS_BASE}", input_bound=True)
    pods = [p["metadata"]["name"] for p in e2e.ready_pods(BALANCED)]
    deadline = time.monotonic() + 180
    while not all(f"rank {i} step " in e2e.cluster.pod_log("default", pod, "trainer") for i, pod in enumerate(pods)):
        assert time.monotonic() < deadline, "the training never stepped"
        time.sleep(0.5)
    yield e2e
    e2e.stop_training(BALANCED)


def _conditions(obj: dict[str, object]) -> dict[str, dict[str, str]]:
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    return {c["type"]: c for c in status.get("conditions") or []}


def test_hung_rank_is_diagnosed_with_its_stack(e2e: Env) -> None:
    e2e.start_training("ddp-hang", slow_rank=1, mode="hang", extra_env={"HANG_AFTER_STEPS": "40"})
    pods = e2e.ready_pods("ddp-hang")
    # rank 1 stops in its data loading after 40 steps; the others then wait in their next all-reduce
    deadline = time.monotonic() + 180
    while not any("hangs at step" in e2e.cluster.pod_log("default", p["metadata"]["name"], "trainer") for p in pods):
        assert time.monotonic() < deadline, "the planted hang never happened"
        time.sleep(0.5)
    e2e.apply_session("hang", "ddp-hang", stepTimeoutSeconds=4, timeoutSeconds=60)
    obj = e2e.wait_phase("hang", timeout=150)
    status = obj["status"]
    assert status["phase"] in ("PartiallySucceeded", "Succeeded"), status
    assert status["counts"]["hung"] >= 1, status
    report = e2e.report(obj)
    hangs = {h["rank"]: h for h in report["diagnosis"]["hangs"]}
    assert 1 in hangs, report["diagnosis"]
    assert "wait_forever" in hangs[1]["stacks"] or "load_batch" in hangs[1]["stacks"], hangs[1]["stacks"][:2000]
    # the culprit alone: rank 1, stuck before the collective the others wait in (from the Flight Recorder)
    d = report["diagnosis"]
    assert [(s["rank"], s["cause"]) for s in d["slow_ranks"]] == [(1, "hang")], d["verdict"]
    assert hangs[1]["culprit"] and "wait_forever" in (hangs[1]["location"] or "")
    assert all(hangs[r]["waiting_collective"] == "all_reduce" for r in (0, 2, 3) if r in hangs), hangs
    [front] = d["flight_recorder"]["wavefronts"]
    assert front["missing_ranks"] == [1] and front["collective"]["call_site"].startswith("train_ddp.py:")
    assert status["summary"]["slowestRank"] == 1 and status["summary"]["cause"] == "hang", status["summary"]
    assert "stepscope-watchdog" not in "".join(h["stacks"] for h in hangs.values())
    assert "rank 1 never reached it: it is stuck at train_ddp.py" in d["verdict"] and "wait_forever" in d["verdict"]
    assert {h["rank"]: h["culprit"] for h in d["hangs"]} == {0: False, 1: True, 2: False, 3: False}
    assert status["progress"] == "0/4, rank 1 hung, 3 waiting", status["progress"]  # the CAPTURED column
    # the targets: the culprit Hung, the others Waiting for it in the collective; one message per target
    assert {t["rank"]: t["state"] for t in status["targets"]} == {0: "Waiting", 1: "Hung", 2: "Waiting", 3: "Waiting"}
    for target in status["targets"]:
        assert target["message"].count("no step boundary") <= 1, target
        if target["state"] == "Waiting":
            assert re.search(r"waits for rank 1 in all_reduce at train_ddp\.py:\d+", target["message"]), target
    torch_version = importlib.metadata.version("torch")  # the hung ranks' torch, from their manifests
    assert [(r["environment"] or {}).get("torch_version") for r in report["ranks"]] == [torch_version] * 4
    e2e.stop_training("ddp-hang")


def test_oss_with_only_a_region_is_captured_analysed_and_deleted(balanced: Env) -> None:
    """oss://bucket/prefix and a region, no endpoint: the sidecars, the analyzer Job and the cleanup Job all derive
    the same endpoint (stepscope_storage; the local cluster points OSS regions at its S3 server)."""
    e2e, base = balanced, OSS_BASE
    storage = {
        "uri": base,
        "region": "cn-hangzhou",
        "credentialsSecret": {"name": "stepscope-s3"},
        "deleteOnSessionDelete": True,
    }
    e2e.apply_session("oss", BALANCED, storage=storage)
    obj = e2e.wait_phase("oss")
    status = obj["status"]
    assert status["phase"] == "Succeeded", status  # captured and analysed
    folder = status["artifactsUri"]
    assert folder.startswith(f"{base}/default/oss-") and status["reportURL"] == f"{folder}/report/report.html"
    traces = sorted(t["artifactUri"] for t in status["targets"])
    assert traces == [f"{folder}/traces/rank{r}.pt.trace.json.gz" for r in range(4)], traces
    assert e2e.cluster.s3 is not None
    s3 = e2e.cluster.s3.client()
    prefix = folder.removeprefix(f"oss://{BUCKET}/") + "/"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])}
    assert {f"{prefix}traces/rank{r}.pt.trace.json.gz" for r in range(4)} <= keys, sorted(keys)
    assert f"{prefix}report/report.json" in keys
    e2e.cluster.api.delete("stepscope.dev/v1alpha1", "profilesessions", "default", "oss")
    deadline = time.monotonic() + 120
    while e2e.cluster.api.get("stepscope.dev/v1alpha1", "profilesessions", "default", "oss") is not None:
        assert time.monotonic() < deadline, "the session was never released"
        time.sleep(0.5)
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("KeyCount", 0) == 0  # deleted


def test_balanced_run_reports_no_slow_rank_and_kubectl_works(balanced: Env) -> None:
    e2e = balanced
    e2e.apply_session("balanced", BALANCED)
    waited = e2e.cluster.kubectl(
        "wait", "--for=condition=Complete", "profilesession/balanced", "--timeout=180s", timeout=200
    )
    assert waited.returncode == 0, waited.stdout + waited.stderr
    obj = e2e.session("balanced")
    status = obj["status"]
    assert status["phase"] == "Succeeded", status
    assert status["progress"] == "4/4"
    report = e2e.report(obj)
    per_rank = [
        {k: r[k] for k in ("rank", "idle_time", "host_gap_time", "compute_time", "communication_time")}
        | {"steps": r["steps"]["durations_us"]}
        for r in report["ranks"]
    ]
    assert report["diagnosis"]["slow_ranks"] == [], (report["diagnosis"]["verdict"], per_rank)
    assert sorted(r["rank"] for r in report["ranks"]) == [0, 1, 2, 3]
    assert [r["steps"]["count"] for r in report["ranks"]] == [6, 6, 6, 6]
    # each rank was summarised by its sidecar, beside its trace (the analyzer Job read those, not the traces)
    folder = status["artifactsUri"].removeprefix(f"s3://{BUCKET}/")
    keys = {o["Key"] for o in e2e.cluster.s3.client().list_objects_v2(Bucket=BUCKET, Prefix=folder + "/")["Contents"]}
    assert {f"{folder}/traces/rank{r}/summary.json" for r in range(4)} <= keys, sorted(keys)
    assert {f"{folder}/session.json", f"{folder}/report/outcome.json"} <= keys, sorted(keys)
    s3 = e2e.cluster.s3.client()
    for r in range(4):  # each summary carries its rank's manifest: the Job read one file per rank
        node = NodeSummary.model_validate_json(
            s3.get_object(Bucket=BUCKET, Key=f"{folder}/traces/rank{r}/summary.json")["Body"].read()
        )
        manifest = RankManifest.model_validate_json(
            s3.get_object(Bucket=BUCKET, Key=f"{folder}/traces/rank{r}/manifest.json")["Body"].read()
        )
        assert node.manifest == manifest.model_copy(update={"upload_attempts": 0, "upload_finished_at": None})
        trace = next(f for f in manifest.files if f.name == TRACE_FILE)  # bound to the trace and the capture
        assert (node.trace_sha256, node.trace_size, node.capture_id) == (trace.sha256, trace.size, manifest.capture_id)
    assert not [e for e in report["errors"] if "node summary" in e["message"]], report["errors"]
    table = e2e.cluster.kubectl("get", "profilesessions", "-o", "wide")
    header = table.stdout.splitlines()[0].split()
    columns = ["NAME", "PHASE", "CAPTURED", "SLOWEST", "CAUSE", "BOTTLENECK"]
    assert header[:6] == columns and "REPORT" in header, table.stdout
    assert "balanced" in table.stdout and "Succeeded" in table.stdout and "4/4" in table.stdout
    described = e2e.cluster.kubectl("describe", "profilesession", "balanced")
    assert described.returncode == 0 and "Complete" in described.stdout, described.stdout + described.stderr


def test_s3_outage_ends_in_a_truthful_failure(balanced: Env) -> None:
    e2e = balanced
    e2e.cluster.s3_stop()
    try:
        # the training steps already: its window is captured in seconds, and the uploads fail until the deadline
        e2e.apply_session("nos3", BALANCED, timeoutSeconds=15)
        obj = e2e.wait_phase("nos3", timeout=120)
    finally:
        e2e.cluster.s3_start()
    status = obj["status"]
    assert status["phase"] == "Failed", status
    conditions = _conditions(obj)
    assert conditions["Failed"]["status"] == "True"
    text = (status.get("message", "") + " ".join(t.get("message", "") for t in status["targets"])).lower()
    assert any(word in text for word in ("upload", "s3", "storage", "endpoint", "connect")), status


def test_dead_sidecar_gives_partial_success_with_a_report_on_the_others(balanced: Env) -> None:
    e2e = balanced
    pods = e2e.ready_pods(BALANCED)
    victim = pods[3]["metadata"]["name"]
    # Many warm-up steps: the sidecar dies after the operator signalled it, before its upload.
    e2e.apply_session("dead", BALANCED, skipSteps=60)
    e2e.wait_phase(
        "dead", phases=("Capturing", "Uploading", "Analyzing", "Succeeded", "PartiallySucceeded", "Failed"), timeout=180
    )
    assert e2e.cluster.kill_container("default", victim, "stepscope-sidecar")
    obj = e2e.wait_phase("dead", timeout=180)
    status = obj["status"]
    assert status["phase"] == "PartiallySucceeded", status
    failed = [t for t in status["targets"] if t["state"] == "Failed"]
    assert [t["pod"] for t in failed] == [victim], status["targets"]
    assert failed[0]["message"], failed
    report = e2e.report(obj)
    ok = sorted(r["rank"] for r in report["ranks"] if r["status"] == "ok")
    assert len(ok) == 3, report["ranks"]
