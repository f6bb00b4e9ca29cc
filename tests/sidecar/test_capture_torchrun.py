"""A 4-rank gloo torchrun training (4 torchrun "nodes" of one process each), one sidecar per rank, moto as S3.

The training script does not import stepscope: the hook comes only through PYTHONPATH and STEPSCOPE_HOOK_DIR."""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sidecar_harness import (
    BUCKET,
    HERE,
    Procs,
    Sidecar,
    base_env,
    capture_body,
    free_port,
    start_sidecar,
    stored_key,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WORLD = 4
SESSION_PREFIX = "profiles/team-a/resnet-01234567"
SESSION_URI = f"s3://{BUCKET}/{SESSION_PREFIX}"


@pytest.fixture(scope="module")
def cluster(
    procs: Procs, workdir: Path, hook_path: Path, token_file: Path, s3: tuple[str, Any]
) -> Iterator[tuple[list[Sidecar], Path]]:
    control = workdir / "control"
    control.mkdir()
    base, endpoint = f"s3://{BUCKET}/profiles", s3[0]
    sidecars = [
        start_sidecar(procs, workdir, token_file, f"n{i}", bases=base, endpoints=endpoint) for i in range(WORLD)
    ]
    master_port = free_port()
    for i, sc in enumerate(sidecars):
        env = base_env() | {
            "PYTHONPATH": str(hook_path),
            "STEPSCOPE_HOOK_DIR": str(sc.hook_dir),
            "STEPSCOPE_POD_NAME": f"pod-n{i}",
            "STEPSCOPE_NODE_NAME": f"node-n{i}",
            "TRAIN_CONTROL_DIR": str(control),
            "GLOO_SOCKET_IFNAME": "lo",
        }
        args = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(WORLD), "--nproc-per-node", "1"]
        args += ["--node-rank", str(i), "--master-addr", "127.0.0.1", "--master-port", str(master_port)]
        args += ["--max-restarts", "0", str(HERE / "train_ddp.py")]
        procs.start(args, env, workdir / f"train-n{i}.log")
    # every hook reports in at its first step boundary
    for i, sc in enumerate(sidecars):
        wait_for(lambda sc=sc, i=i: sc.call("GET", "/v1/status")[1].get("hookRanks") == [i], 300, f"rank {i} hook")
    yield sidecars, control
    (control / "stop").write_text("")


def test_requests_without_a_valid_token_are_refused_and_start_nothing(cluster: tuple[list[Sidecar], Path]) -> None:
    sc = cluster[0][0]
    body = capture_body("no-auth", SESSION_URI)
    for token in (None, "wrong-token", ""):
        code, resp = sc.call("POST", "/v1/captures", body, token=token)
        assert code == 401, resp
        assert resp["error"] == "unauthorized"
    assert sc.call("GET", "/v1/status", token="nope")[0] == 401
    assert sc.call("POST", "/v1/captures/no-auth/abort", token=None)[0] == 401
    assert sc.call("GET", "/healthz", token=None) == (200, "ok")
    assert not (sc.hook_dir / "request.json").exists()
    assert sc.call("GET", "/v1/captures/no-auth")[0] == 404
    status = sc.call("GET", "/v1/status")[1]
    assert status["busy"] is False and "current" not in status


def test_three_step_capture_on_four_ranks(cluster: tuple[list[Sidecar], Path], s3: tuple[str, Any]) -> None:
    sidecars, _ = cluster
    endpoint, client = s3
    body = capture_body("cap-3steps", SESSION_URI, endpoint, steps=3, skipSteps=1)
    for sc in sidecars:
        code, status = sc.call("POST", "/v1/captures", body)
        assert code == 202, status
        assert status["state"] == "armed"
    # idempotent per capture id, one capture at a time
    assert sidecars[0].call("POST", "/v1/captures", body)[0] == 200
    other = capture_body("cap-other", SESSION_URI, endpoint)
    assert sidecars[0].call("POST", "/v1/captures", other)[0] == 409

    finals = [sc.wait_terminal("cap-3steps", 240) for sc in sidecars]
    for rank, final in enumerate(finals):
        assert final["state"] == "uploaded", final
        assert final["ranks"] == [rank]
        assert final["stepsCaptured"] == 3

    for rank, sc in enumerate(sidecars):
        keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix=SESSION_PREFIX + "/")["Contents"]}
        key = functools.partial(stored_key, SESSION_PREFIX, rank)
        assert key("trace.pt.trace.json.gz") in keys and key("manifest.json") in keys
        assert key("trace.pt.trace.json.gz").endswith(f"/traces/rank{rank}.pt.trace.json.gz")
        manifest = json.loads(client.get_object(Bucket=BUCKET, Key=key("manifest.json"))["Body"].read())
        assert manifest["state"] == "uploaded" and manifest["rank"] == rank and manifest["errors"] == []
        assert manifest["meta"]["worldSize"] == WORLD and manifest["meta"]["stepsCaptured"] == 3
        assert len(manifest["meta"]["stepDurationsMs"]) == 3
        assert manifest["files"], manifest
        for f in manifest["files"]:
            blob = client.get_object(Bucket=BUCKET, Key=key(f["name"]))["Body"].read()
            assert len(blob) == f["size"] and hashlib.sha256(blob).hexdigest() == f["sha256"], f["name"]
        trace = json.loads(
            gzip.decompress(client.get_object(Bucket=BUCKET, Key=key("trace.pt.trace.json.gz"))["Body"].read())
        )
        steps = sorted(e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
        assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"], steps
        assert trace["distributedInfo"]["rank"] == rank and trace["distributedInfo"]["world_size"] == WORLD
        assert trace["distributedInfo"]["backend"] == "gloo"
        assert trace["stepscope"]["pod"] == f"pod-n{rank}" and trace["stepscope"]["node"] == f"node-n{rank}"
        # local copy removed only after the confirmed upload
        assert not (sc.hook_dir / "captures" / "cap-3steps" / f"rank-{rank}").exists()
        assert not (sc.hook_dir / "request.json").exists()


def test_a_rank_that_stops_stepping_yields_stack_dumps(
    cluster: tuple[list[Sidecar], Path], s3: tuple[str, Any]
) -> None:
    sidecars, control = cluster
    endpoint, client = s3
    (control / "hang-rank-2").write_text("")
    step_timeout = 3
    time.sleep(0.5)  # rank 2 is now inside stuck_in_data_loader, the others wait for it in allreduce
    body = capture_body("cap-hang", SESSION_URI, endpoint, steps=50, stepTimeoutSeconds=step_timeout)
    began = time.monotonic()
    for sc in sidecars:
        assert sc.call("POST", "/v1/captures", body)[0] == 202
    finals = [sc.wait_terminal("cap-hang", 240) for sc in sidecars]
    elapsed = time.monotonic() - began
    assert all(f["state"] == "hung" for f in finals), finals
    assert elapsed < step_timeout + 8, elapsed
    for rank in range(WORLD):
        key = functools.partial(stored_key, SESSION_PREFIX, rank)
        stacks = client.get_object(Bucket=BUCKET, Key=key("stacks.txt"))["Body"].read().decode()
        assert "seconds_since_last_step" in stacks and "Thread" in stacks
        manifest = json.loads(client.get_object(Bucket=BUCKET, Key=key("manifest.json"))["Body"].read())
        assert manifest["state"] == "hung" and manifest["meta"]["hung"] is True
        assert manifest["meta"]["secondsSinceLastStep"] >= step_timeout
        if rank == 2:
            assert "stuck_in_data_loader" in stacks
        else:
            assert "backward" in stacks  # waiting in DDP's allreduce for rank 2
