"""`stepscope analyzer-job` in separate processes against a moto S3 server, with no Kubernetes API at all: all-in-one,
and map (2 shards) then reduce. The Job gets the accepted session in its arguments, writes it into the folder
(session.json), writes the report there and hands back its outcome (summary, URLs, ReportReady's ok and message) as
report/outcome.json and in its termination-message file; a failure hands back why."""

from __future__ import annotations

import ast
import csv
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from stepscope_analyzer.analyses.rank_summary import summarize_trace
from stepscope_contract.analysis_documents import AnalysisOutcome, SessionDocument
from stepscope_contract.report import Report
from stepscope_contract.storage import (
    GPU_METRICS_FILE,
    RANKS_TABLE,
    TRACE_FILE,
    facts_key,
    parse_storage_uri,
    rank_artifact_key,
    rank_location,
    session_location,
    summary_key,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_scenario import nvml_samples

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BUCKET = "stepscope-artifacts"


def _session(name: str, endpoint: str) -> SessionDocument:
    spec = {
        "targets": {"selector": {"matchLabels": {"app": "trainer"}}},
        "storage": {"uri": f"s3://{BUCKET}/profiles", "endpoint": endpoint, "addressingStyle": "path"},
        "analysis": {"minSlowdownPercent": 5},
    }
    uid = f"0000{name}-1111-2222-3333-444455556666"
    return SessionDocument.model_validate(
        {"namespace": "team-a", "name": name, "uid": uid, "captureId": f"{name}-c1", "spec": spec}
    )


def _upload(endpoint: str, doc: SessionDocument, traces: dict[int, bytes], first_layout: bool = False) -> Any:
    """The traces where the sidecars put them (traces/rank<R>.pt.trace.json.gz), or in the first layout
    (ranks/<R>/trace.pt.trace.json.gz) that sessions written before still have."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    loc = session_location(parse_storage_uri(f"s3://{BUCKET}/profiles"), doc.namespace, doc.name, doc.uid)
    for rank, data in traces.items():
        key = rank_location(loc, rank).key(TRACE_FILE) if first_layout else rank_artifact_key(loc, rank, TRACE_FILE)
        s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    return s3, loc


def _job(doc: SessionDocument, out: Path, *args: str, extra_env: dict[str, str] | None = None) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}  # no Kubernetes API to reach
    cmd = [sys.executable, "-m", "stepscope_cli.main", "analyzer-job", "--session-json", doc.to_json(),
           "--outcome-file", str(out), *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**env, **(extra_env or {})},
                          check=False)  # fmt: skip


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what depends on when and where it was written (its time, the trace links' base)."""
    out = {k: v for k, v in report.items() if k not in ("generated_at", "analysis_seconds")}
    out["ranks"] = [{k: v for k, v in r.items() if k != "trace_link"} for r in report["ranks"]]
    return out


def _handed_back(out: Path) -> AnalysisOutcome:
    text = out.read_text()
    assert len(text.encode()) <= 4096  # what the kubelet keeps of a termination message
    outcome = AnalysisOutcome.from_json(text)
    assert outcome is not None
    return outcome


def test_all_mode_writes_report_and_hands_back_its_outcome(
    moto_endpoint: str, gloo_traces: list[bytes], malformed_traces: dict[str, bytes], tmp_path: Path
) -> None:
    doc = _session("train-1", moto_endpoint)
    traces = {0: gloo_traces[0], 1: gloo_traces[1], 2: malformed_traces["invalid json"]}
    s3, loc = _upload(moto_endpoint, doc, traces, first_layout=True)  # sessions written before still analyse
    result = _job(doc, tmp_path / "termination-log")
    assert result.returncode == 0, result.stderr
    status = _handed_back(tmp_path / "termination-log")
    stored = AnalysisOutcome.from_json(
        s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/outcome.json")["Body"].read()
    )
    assert stored == status  # the same document in storage and in the termination message
    assert status.ok and status.message == (status.summary.verdict if status.summary else "")
    written = SessionDocument.from_json(s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/session.json")["Body"].read())
    assert written == doc  # the session as accepted, in the folder for every later step
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
    assert report.session.name == "train-1" and report.session.uid == doc.uid
    assert report.session.capture_id == "train-1-c1"
    assert [r.status.value for r in report.ranks] == ["ok", "ok", "error"]
    assert [r.trace_link for r in report.ranks] == [f"../ranks/{r}/trace.pt.trace.json.gz" for r in range(3)]
    assert report.capture is not None and (report.capture.steps, report.capture.skip_steps) == (5, 1)
    assert report.capture.activities == ["cpu", "cuda"] and report.capture.gpu_metrics_interval_ms == 100
    html = s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/report.html")
    assert html["ContentType"].startswith("text/html")
    assert s3.get_object(Bucket=BUCKET, Key=summary_key(loc, 2))["Body"].read()  # summaries are kept
    # `stepscope analyze` of the folder is the same program: the session from session.json, the same report
    local = subprocess.run(
        [sys.executable, "-m", "stepscope_cli.main", "analyze", f"s3://{BUCKET}/{loc.prefix}", "-o",
         str(tmp_path / "local"), "--endpoint", moto_endpoint, "--addressing-style", "path", "--allow-partial"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert _comparable(json.loads((tmp_path / "local" / "report.json").read_text())) == _comparable(json.loads(body))


def test_map_shards_then_reduce_as_one_job(moto_endpoint: str, gloo_traces: list[bytes], tmp_path: Path) -> None:
    """Four map shards, each leaving its ranks' summaries and its partial (their compact numbers), then the reduce
    that merges the partials: the same report.json and ranks table as one Job that does it all."""
    doc = _session("train-2", moto_endpoint)
    traces = {r: gloo_traces[1 if r == 3 else 0] for r in range(4)}  # rank 3 is the sleeper
    s3, loc = _upload(moto_endpoint, doc, traces)
    env = summarize_trace(gloo_traces[1]).environment
    assert env is not None and env.window_start is not None and env.window_end is not None
    window = (env.window_start.timestamp(), env.window_end.timestamp())
    samples = "".join(json.dumps(x) + "\n" for x in nvml_samples(window, gpu=0, throttled=True, seed=1))
    s3.put_object(Bucket=BUCKET, Key=rank_artifact_key(loc, 3, GPU_METRICS_FILE), Body=gzip.compress(samples.encode()))
    for index in range(4):
        result = _job(doc, tmp_path / f"map-{index}", "--mode", "map", "--shards", "4",
                      extra_env={"JOB_COMPLETION_INDEX": str(index)})  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert f"map shard {index}/4: 1 of 4 rank(s)" in result.stderr
        assert not (tmp_path / f"map-{index}").exists()  # a map shard has no outcome to hand back
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{loc.prefix}/summaries/")["Contents"]}
    assert keys == {summary_key(loc, r) for r in range(4)} | {facts_key(loc, i, 4) for i in range(4)}
    result = _job(doc, tmp_path / "reduce", "--mode", "reduce", "--shards", "4")
    assert result.returncode == 0, result.stderr
    status = _handed_back(tmp_path / "reduce")
    assert status.summary is not None and status.summary.slowest_rank == 3 and status.summary.cause == "host"
    assert status.report_url and status.report_url.endswith("/report/report.html")
    report = Report.model_validate_json(
        s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/report.json")["Body"].read()
    )
    assert [r.trace_link for r in report.ranks] == [f"../traces/rank{r}.pt.trace.json.gz" for r in range(4)]
    sampled = {r.rank: r.gpu_metrics for r in report.ranks if r.gpu_metrics is not None}
    assert list(sampled) == [3]  # read in the map step, carried by the summary to the reduce
    assert sampled[3] is not None and sampled[3].sm_clock_mhz is not None and sampled[3].sm_clock_mhz.max <= 705
    reduced = s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/report.json")["Body"].read()
    table = s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/{RANKS_TABLE}")["Body"].read()
    assert [row["rank"] for row in csv.DictReader(io.StringIO(gzip.decompress(table).decode()))] == ["0", "1", "2", "3"]
    result = _job(doc, tmp_path / "all", "--mode", "all")  # K = 1: the same folder analysed by one Job
    assert result.returncode == 0, result.stderr
    whole = s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/report.json")["Body"].read()
    assert _comparable(json.loads(reduced)) == _comparable(json.loads(whole))
    assert s3.get_object(Bucket=BUCKET, Key=f"{loc.prefix}/report/{RANKS_TABLE}")["Body"].read() == table


def test_failure_hands_back_why(moto_endpoint: str, tmp_path: Path) -> None:
    doc = _session("train-3", moto_endpoint)
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    result = _job(doc, tmp_path / "termination-log")
    assert result.returncode == 1
    assert "no rank's files under" in result.stderr
    outcome = _handed_back(tmp_path / "termination-log")
    assert not outcome.ok and outcome.message.startswith("analysis failed: no rank's files")
    assert outcome.summary is None and outcome.report_url is None
    bad = subprocess.run(
        [sys.executable, "-m", "stepscope_cli.main", "analyzer-job", "--session-json", "{}", "--outcome-file",
         str(tmp_path / "bad")], capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "--session-json" in bad.stderr
    refused = _handed_back(tmp_path / "bad")
    assert not refused.ok and "not a session document" in refused.message


def test_the_analyzer_package_needs_no_kubernetes_client() -> None:
    """No module under analyzer_job/ imports the kubernetes client: the Job reads and writes storage only."""
    root = Path(__file__).resolve().parents[3] / "analyzer_job"
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] == "kubernetes"]
    assert offenders == []
