"""One training process with an explicit stepscope_hook.step() loop (no optimizer) and its sidecar:
file:// storage, a broken profiler request, abort, and S3 outages (moto_server behind a loopback relay)."""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope_contract.python_stacks import HEADER_PREFIX
from stepscope_contract.storage import PYTHON_STACKS_FILE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sidecar_harness import (
    BUCKET,
    HERE,
    Procs,
    Sidecar,
    TcpForwarder,
    base_env,
    capture_body,
    free_port,
    start_sidecar,
    stored_key,
    stored_path,
    wait_for,
)

from stepscope_analyzer import tool_version
from stepscope_analyzer.ranks.node_summaries import summarise_trace
from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.manifest import RankManifest
from stepscope_contract.wire import HookState, RankMeta

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


PORTS: dict[str, int] = {}  # the S3 relay's port and a port where nothing listens, chosen with the sidecar


@pytest.fixture(scope="module")
def solo(procs: Procs, workdir: Path, hook_path: Path, token_file: Path) -> Iterator[tuple[Sidecar, Path]]:
    control = workdir / "control-solo"
    control.mkdir()
    PORTS.update(relay=free_port(), dead=free_port())
    bases = [f"file://{workdir}/{d}" for d in ("store", "store2", "store3")]
    bases += [f"s3://{BUCKET}/outage", f"s3://{BUCKET}/gone"]
    sc = start_sidecar(
        procs,
        workdir,
        token_file,
        "solo",
        *("--retry-attempts", "40", "--multipart-threshold", "1024"),
        bases=",".join(bases),
        endpoints=",".join(f"http://127.0.0.1:{p}" for p in PORTS.values()),
    )
    env = base_env() | {
        "PYTHONPATH": str(hook_path),
        "STEPSCOPE_HOOK_DIR": str(sc.hook_dir),
        "TRAIN_CONTROL_DIR": str(control),
    }
    procs.start([sys.executable, str(HERE / "train_explicit.py")], env, workdir / "train-solo.log")
    wait_for(lambda: sc.call("GET", "/v1/status")[1].get("hookRanks") == [0], 240, "the hook to report in")
    yield sc, control
    (control / "stop").write_text("")


def steps_done(control: Path) -> int:
    try:
        return int((control / "steps").read_text() or 0)
    except (OSError, ValueError):
        return 0


def read_state(sc: Sidecar) -> HookState:
    return HookState.model_validate_json((sc.hook_dir / "state" / "rank-0.json").read_bytes())


def profiler_steps(trace_gz: bytes) -> list[str]:
    trace = json.loads(gzip.decompress(trace_gz))
    return sorted(e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))


def test_explicit_step_loop_captures_to_a_local_folder(solo: tuple[Sidecar, Path], workdir: Path) -> None:
    sc, _ = solo
    store = workdir / "store"
    body = capture_body("explicit-1", f"file://{store}/team-a/resnet-01234567", steps=3, skipSteps=2)
    assert sc.call("POST", "/v1/captures", body)[0] == 202
    final = sc.wait_terminal("explicit-1", 240)
    assert final["state"] == "uploaded", final
    session = store / "team-a" / "resnet-01234567"
    trace = stored_path(session, 0, "trace.pt.trace.json.gz")
    assert trace == session / "traces" / "rank0.pt.trace.json.gz"
    assert profiler_steps(trace.read_bytes()) == [f"ProfilerStep#{i}" for i in range(3)]
    cpu = json.loads(gzip.decompress(trace.read_bytes()))["stepscopeCpu"]  # the training thread's schedstat per step
    assert [row[0] for row in cpu["steps"]] == [0, 1, 2] and all(row[1] > 0 and row[2] >= 0 for row in cpu["steps"])
    manifest = RankManifest.model_validate_json(stored_path(session, 0, "manifest.json").read_bytes())
    assert manifest.meta is not None and manifest.meta.steps_captured == 3
    assert RankMeta.model_validate(manifest.meta.model_dump()).device == "cpu"
    for f in manifest.files:
        assert hashlib.sha256(stored_path(session, 0, f.name).read_bytes()).hexdigest() == f.sha256
    stacks = stored_path(session, 0, PYTHON_STACKS_FILE)  # capture.pythonSampling on by default: uploaded beside it
    assert stacks == session / "traces" / "rank0" / PYTHON_STACKS_FILE and PYTHON_STACKS_FILE in {
        f.name for f in manifest.files
    }
    assert stacks.read_text().startswith(HEADER_PREFIX) and "train_explicit.py:" in stacks.read_text()
    assert manifest.gpu_metrics.startswith(("unavailable", "captured"))
    state = read_state(sc)  # the hook's JSON matches the contract model
    assert state.phase == "written" and state.capture_id == "explicit-1" and state.steps_captured == 3
    assert final["artifacts"][0]["uri"].startswith("file://")
    # summarised here, beside the trace, by the analyzer's own code (the sidecar ran it as a command)
    node = NodeSummary.model_validate_json(stored_path(session, 0, "summary.json").read_bytes())
    assert node.analyzer_version == tool_version() and node.rank == 0 and node.top_n == 50
    assert node.summary is not None and node.summary == summarise_trace(trace.read_bytes(), 0, 50).summary
    upload_figures = {"upload_attempts": 0, "upload_finished_at": None}  # the one thing it cannot know yet
    assert node.manifest == manifest.model_copy(update=upload_figures)  # the analysis reads one file for the rank


def test_a_broken_profiler_request_fails_the_capture_not_the_training(
    solo: tuple[Sidecar, Path], workdir: Path
) -> None:
    sc, control = solo
    # the sidecar validates requests: an unknown activity never gets past it
    bad = capture_body("bad-activity", f"file://{workdir}/store", activities=["tpu"])
    assert sc.call("POST", "/v1/captures", bad)[0] == 400
    for uri in ("gs://bucket/x", "s3://bucket/../x", "file://relative", "oss://bucket/x"):
        body = capture_body("bad-uri", uri)
        body["destination"].pop("region")  # oss:// needs an endpoint or a region
        code, resp = sc.call("POST", "/v1/captures", body)
        assert code == 400 and resp["error"] == "invalid destination", (uri, resp)
    assert sc.call("GET", "/v1/captures/bad-uri")[0] == 404
    # a request that reaches the hook anyway (older sidecar, hand-written file) fails only the capture
    request = {"captureId": "bad-activity", "steps": 2, "activities": ["tpu"], "requestedAt": time.time()}
    (sc.hook_dir / "request.json.tmp").write_text(json.dumps(request))
    (sc.hook_dir / "request.json.tmp").rename(sc.hook_dir / "request.json")
    # (armed first: a hand-written request gets the contract's defaults, skipSteps 1)
    state = wait_for(
        lambda: (s := read_state(sc)).capture_id == "bad-activity" and s.phase != "armed" and s,
        120,
        "the hook to fail it",
    )
    assert state.phase == "failed" and "unknown profiler activity 'tpu'" in state.message
    before = steps_done(control)
    wait_for(lambda: steps_done(control) > before + 5, 120, "training to keep stepping")
    (sc.hook_dir / "request.json").unlink()
    # the hook is still enabled: the next capture works
    body = capture_body("after-bad", f"file://{workdir}/store2/team-a/resnet-01234567", steps=2, skipSteps=0)
    assert sc.call("POST", "/v1/captures", body)[0] == 202
    assert sc.wait_terminal("after-bad", 240)["state"] == "uploaded"


def test_abort_stops_a_pending_capture(solo: tuple[Sidecar, Path], workdir: Path) -> None:
    sc, _ = solo
    body = capture_body("to-abort", f"file://{workdir}/store3/team-a/resnet-01234567", steps=2, skipSteps=100000)
    assert sc.call("POST", "/v1/captures", body)[0] == 202
    wait_for(lambda: read_state(sc).capture_id == "to-abort", 120, "the hook to arm")
    code, status = sc.call("POST", "/v1/captures/to-abort/abort")
    assert code == 200 and status["state"] == "aborted"
    wait_for(lambda: read_state(sc).phase == "aborted", 120, "the hook to drop it")
    assert not (workdir / "store3").exists()


def test_s3_unavailable_then_back_uploads_after_retries(solo: tuple[Sidecar, Path], s3: tuple[str, Any]) -> None:
    sc, _ = solo
    endpoint, client = s3
    relay_port = PORTS["relay"]  # nothing listens there yet: connection refused
    prefix = "outage/team-a/resnet-01234567"
    body = capture_body("outage-1", f"s3://{BUCKET}/{prefix}", f"http://127.0.0.1:{relay_port}", steps=2)
    assert sc.call("POST", "/v1/captures", body)[0] == 202

    def retries() -> float:
        text = sc.call("GET", "/metrics")[1]
        line = next((x for x in text.splitlines() if x.startswith("stepscope_sidecar_upload_retries_total")), "0 0")
        return float(line.split()[-1])

    wait_for(lambda: sc.call("GET", "/v1/captures/outage-1")[1]["state"] == "uploading", 120, "the upload to start")
    time.sleep(2.0)  # several refused attempts
    relay = TcpForwarder(relay_port, int(endpoint.rsplit(":", 1)[1]))
    try:
        final = sc.wait_terminal("outage-1", 240)
    finally:
        relay.close()
    assert final["state"] == "uploaded", final
    assert "retr" in final["message"]
    assert retries() >= 1
    key = stored_key(prefix, 0, "trace.pt.trace.json.gz")
    head = client.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] > 1024
    assert head["ETag"].strip('"').endswith("-1")  # above the multipart threshold: a multipart upload
    blob = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    manifest = json.loads(client.get_object(Bucket=BUCKET, Key=stored_key(prefix, 0, "manifest.json"))["Body"].read())
    entry = next(f for f in manifest["files"] if f["name"] == "trace.pt.trace.json.gz")
    assert hashlib.sha256(blob).hexdigest() == entry["sha256"]
    assert manifest["uploadAttempts"] > len(manifest["files"]) + 1
    assert profiler_steps(blob) == ["ProfilerStep#0", "ProfilerStep#1"]


def test_s3_gone_for_good_fails_with_the_reason_and_keeps_the_trace(solo: tuple[Sidecar, Path]) -> None:
    sc, _ = solo
    dead = PORTS["dead"]
    uri = f"s3://{BUCKET}/gone/team-a/resnet-01234567"
    body = capture_body("outage-2", uri, f"http://127.0.0.1:{dead}", steps=2, timeoutSeconds=10)
    assert sc.call("POST", "/v1/captures", body)[0] == 202
    final = sc.wait_terminal("outage-2", 240)
    assert final["state"] == "failed", final
    assert "upload of trace.pt.trace.json.gz failed" in final["message"]
    assert "Could not connect" in final["message"] or "EndpointConnectionError" in final["message"]
    kept = sc.hook_dir / "captures" / "outage-2" / "rank-0"
    assert profiler_steps((kept / "trace.pt.trace.json.gz").read_bytes()) == ["ProfilerStep#0", "ProfilerStep#1"]
    manifest = RankManifest.model_validate_json((kept / "manifest.json").read_bytes())
    assert manifest.state == "failed" and any("failed after" in e for e in manifest.errors)
