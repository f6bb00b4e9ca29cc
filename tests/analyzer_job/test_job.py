"""`stepscope analyzer-job` in separate processes against the Kubernetes API emulator and a moto S3 server:
all-in-one, and map (2 shards) then reduce; the session's status gets the summary, URLs and ReportReady."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from stepscope_analyzer.analyses.rank_summary import summarize_trace
from stepscope_contract.report import Report
from stepscope_contract.session import ProfileSessionStatus
from stepscope_contract.storage import (
    GPU_METRICS_FILE,
    TRACE_FILE,
    parse_storage_uri,
    rank_artifact_key,
    rank_location,
    session_location,
    summary_key,
)
from stepscope_local.kube import EmulatorServer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_scenario import nvml_samples

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CRD = Path(__file__).resolve().parents[2] / "crds" / "profilesessions.stepscope.dev.yaml"
API = "stepscope.dev/v1alpha1"
BUCKET = "stepscope-artifacts"


@pytest.fixture
def kube() -> Iterator[EmulatorServer]:
    with EmulatorServer() as server:
        server.apply(yaml.safe_load(CRD.read_text()))
        yield server


def _session(kube: EmulatorServer, name: str, endpoint: str) -> dict[str, Any]:
    body = {
        "apiVersion": API,
        "kind": "ProfileSession",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "targets": {"selector": {"matchLabels": {"app": "trainer"}}},
            "storage": {"uri": f"s3://{BUCKET}/profiles", "endpoint": endpoint, "addressingStyle": "path"},
            "analysis": {"minSlowdownPercent": 5},
        },
    }
    kube.apply(body)
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    accepted = {"type": "Accepted", "status": "True", "reason": "SpecValid", "message": "", "lastTransitionTime": now}
    kube.patch_status(API, "profilesessions", "team-a", name, {"phase": "Analyzing", "conditions": [accepted]})
    obj = kube.get(API, "profilesessions", "team-a", name)
    assert obj is not None
    return dict(obj)


def _upload(endpoint: str, obj: dict[str, Any], traces: dict[int, bytes], first_layout: bool = False) -> Any:
    """The traces where the sidecars put them (traces/rank<R>.pt.trace.json.gz), or in the first layout
    (ranks/<R>/trace.pt.trace.json.gz) that sessions written before still have."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    meta = obj["metadata"]
    loc = session_location(parse_storage_uri(f"s3://{BUCKET}/profiles"), meta["namespace"], meta["name"], meta["uid"])
    for rank, data in traces.items():
        key = rank_location(loc, rank).key(TRACE_FILE) if first_layout else rank_artifact_key(loc, rank, TRACE_FILE)
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    return s3, loc


def _job(kube: EmulatorServer, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig_path), **(extra_env or {})}
    cmd = [sys.executable, "-m", "stepscope_cli.main", "analyzer-job", "--namespace", "team-a", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)


def _status(kube: EmulatorServer, name: str) -> ProfileSessionStatus:
    obj = kube.get(API, "profilesessions", "team-a", name)
    assert obj is not None
    return ProfileSessionStatus.model_validate(obj["status"])


def test_all_mode_writes_report_and_patches_status(
    kube: EmulatorServer, moto_endpoint: str, gloo_traces: list[bytes], malformed_traces: dict[str, bytes]
) -> None:
    obj = _session(kube, "train-1", moto_endpoint)
    traces = {0: gloo_traces[0], 1: gloo_traces[1], 2: malformed_traces["invalid json"]}
    s3, loc = _upload(moto_endpoint, obj, traces, first_layout=True)  # sessions written before still analyse
    result = _job(kube, "--name", "train-1")
    assert result.returncode == 0, result.stderr
    status = _status(kube, "train-1")
    assert status.phase.value == "Analyzing"  # the operator's field is untouched
    types = {c.type.value: c for c in status.conditions}
    assert set(types) == {"Accepted", "ReportReady"}  # the other conditions are kept
    assert types["ReportReady"].status.value == "True" and types["ReportReady"].reason == "ReportWritten"
    assert status.summary is not None
    assert status.summary.slowest_rank == 1 and status.summary.cause == "host"
    assert status.summary.errored_ranks == [2]
    assert status.summary.verdict.startswith("Rank 1 slows the job")
    # the headline: where rank 1 spends its excess (it sleeps before its all_reduce), not where rank 0 waits
    assert (status.summary.top_bottleneck or "").startswith("host time between"), status.summary.top_bottleneck
    assert status.report_url == f"s3://{BUCKET}/{loc.prefix}/report/report.html"
    assert status.report_json_url == f"s3://{BUCKET}/{loc.prefix}/report/report.json"
    body = s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/report.json")["Body"].read()
    report = Report.model_validate_json(body)
    assert report.session.name == "train-1" and report.session.uid == obj["metadata"]["uid"]
    assert [r.status.value for r in report.ranks] == ["ok", "ok", "error"]
    assert [r.trace_link for r in report.ranks] == [f"../ranks/{r}/trace.pt.trace.json.gz" for r in range(3)]
    assert report.capture is not None and (report.capture.steps, report.capture.skip_steps) == (5, 1)
    assert report.capture.activities == ["cpu", "cuda"] and report.capture.gpu_metrics_interval_ms == 100
    html = s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/report.html")
    assert html["ContentType"].startswith("text/html")
    assert s3.get_object(Bucket=BUCKET, Key=summary_key(loc, 2))["Body"].read()  # summaries are kept


def test_map_shards_then_reduce(kube: EmulatorServer, moto_endpoint: str, gloo_traces: list[bytes]) -> None:
    obj = _session(kube, "train-2", moto_endpoint)
    traces = {r: gloo_traces[1 if r == 3 else 0] for r in range(4)}  # rank 3 is the sleeper
    s3, loc = _upload(moto_endpoint, obj, traces)
    env = summarize_trace(gloo_traces[1]).environment
    assert env is not None and env.window_start is not None and env.window_end is not None
    window = (env.window_start.timestamp(), env.window_end.timestamp())
    samples = "".join(json.dumps(x) + "\n" for x in nvml_samples(window, gpu=0, throttled=True, seed=1))
    s3.put_object(Bucket=BUCKET, Key=rank_artifact_key(loc, 3, GPU_METRICS_FILE), Body=gzip.compress(samples.encode()))
    for index in range(2):
        result = _job(kube, "--name", "train-2", "--mode", "map", "--shards", "2",
                      extra_env={"JOB_COMPLETION_INDEX": str(index)})  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert f"map shard {index}/2: 2 of 4 rank(s)" in result.stderr
    assert _status(kube, "train-2").summary is None  # map does not touch the status
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{loc.prefix}/summaries/")["Contents"]}
    assert keys == {summary_key(loc, r) for r in range(4)}
    result = _job(kube, "--name", "train-2", "--mode", "reduce")
    assert result.returncode == 0, result.stderr
    status = _status(kube, "train-2")
    assert status.summary is not None and status.summary.slowest_rank == 3 and status.summary.cause == "host"
    assert status.report_url and status.report_url.endswith("/report/report.html")
    report = Report.model_validate_json(
        s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/report.json")["Body"].read()
    )
    assert [r.trace_link for r in report.ranks] == [f"../traces/rank{r}.pt.trace.json.gz" for r in range(4)]
    sampled = {r.rank: r.gpu_metrics for r in report.ranks if r.gpu_metrics is not None}
    assert list(sampled) == [3]  # read in the map step, carried by the summary to the reduce
    assert sampled[3] is not None and sampled[3].sm_clock_mhz is not None and sampled[3].sm_clock_mhz.max <= 705


def test_failure_sets_report_ready_false(kube: EmulatorServer, moto_endpoint: str) -> None:
    obj = _session(kube, "train-3", moto_endpoint)
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    result = _job(kube, "--name", "train-3")
    assert result.returncode == 1
    assert "no rank's files under" in result.stderr
    ready = next(c for c in _status(kube, "train-3").conditions if c.type.value == "ReportReady")
    assert ready.status.value == "False" and ready.reason == "AnalysisFailed" and "no rank's files" in ready.message
    missing = _job(kube, "--name", "does-not-exist")
    assert missing.returncode == 1 and "cannot read ProfileSession team-a/does-not-exist: 404" in missing.stderr
    del obj
