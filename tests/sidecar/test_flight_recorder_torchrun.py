"""Hangs and desyncs on real 4-rank gloo DDP jobs (torchrun, one "node" per rank, one sidecar each, moto as S3): the
hooks dump PyTorch's Flight Recorder beside the stacks, the sidecars upload both, and `stepscope analyze` of the
session names the culprit rank and the collective the others wait in, with its line.

Each scenario starts its own job of tests/sidecar/train_faults.py, arms a capture on every rank (skipSteps so large
that nothing is profiled; stepTimeoutSeconds 3), then makes rank 2 misbehave: stuck in data loading, another
collective, or a killed process. The stuck job is first dumped on demand while every rank still trains: a healthy
job's dumps show no wavefront. A rank that passes other sizes takes the same path as one that calls another
collective: its diagnosis is checked on the recorded dumps of such a job (tests/analyzer_job/diagnosis/test_hangs.py,
tests/analyzer_job/flight_recorder/)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stepscope_contract.storage import MANIFEST_FILE, parse_storage_uri, rank_artifact_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyzer_job" / "flight_recorder"))
from fr_dumps import site
from sidecar_harness import (
    BUCKET,
    HERE,
    NAMESPACE,
    VENV_BIN,
    Procs,
    Sidecar,
    base_env,
    capture_body,
    free_port,
    start_sidecar,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WORLD = 4
PREFIX = "profiles/team-a"
FR_UID = "f1a9b7c3d2e14f50"


@dataclass
class Outcome:
    report: dict[str, Any]
    finals: list[dict[str, Any]]
    manifests: list[dict[str, Any] | None]

    @property
    def diagnosis(self) -> dict[str, Any]:
        return dict(self.report["diagnosis"])


@pytest.fixture(scope="module")
def sidecars(procs: Procs, workdir: Path, token_file: Path, s3: tuple[str, Any]) -> list[Sidecar]:
    base, endpoint = f"s3://{BUCKET}/{PREFIX}", s3[0]
    return [start_sidecar(procs, workdir, token_file, f"fr{i}", bases=base, endpoints=endpoint) for i in range(WORLD)]


def _hook_phase(sc: Sidecar, rank: int) -> str:
    try:
        return str(json.loads((sc.hook_dir / "state" / f"rank-{rank}.json").read_text())["phase"])
    except (OSError, ValueError, KeyError):
        return ""


def _start_job(workdir: Path, hook_path: Path, sidecars: list[Sidecar], fault: str) -> tuple[Procs, Path]:
    control = workdir / f"control-{fault}"
    control.mkdir()
    for sc in sidecars:  # the previous job's hook states
        for old in (sc.hook_dir / "state").glob("rank-*.json"):
            old.unlink()
    job = Procs()
    port = free_port()
    for i, sc in enumerate(sidecars):
        env = base_env() | {
            "PYTHONPATH": str(hook_path),
            "STEPSCOPE_HOOK_DIR": str(sc.hook_dir),
            "TRAIN_CONTROL_DIR": str(control),
            "GLOO_SOCKET_IFNAME": "lo",
            "FAULT": fault,
            "FAULT_RANK": "2",
            "TORCH_FR_BUFFER_SIZE": "2000",  # what injection sets
        }
        args = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(WORLD), "--nproc-per-node", "1"]
        args += ["--node-rank", str(i), "--master-addr", "127.0.0.1", "--master-port", str(port)]
        args += ["--max-restarts", "0", str(HERE / "train_faults.py")]
        job.start(args, env, workdir / f"train-{fault}-{i}.log")
    for i, sc in enumerate(sidecars):
        wait_for(lambda i=i: (control / f"steps-rank-{i}").exists(), 120, f"rank {i} to step")
        wait_for(lambda sc=sc, i=i: sc.call("GET", "/v1/status")[1].get("hookRanks") == [i], 60, f"rank {i} hook")
    return job, control


def _analyze(workdir: Path, endpoint: str, session: str) -> dict[str, Any]:
    out = workdir / f"report-{session.replace('/', '-')}"
    result = subprocess.run(
        [
            str(VENV_BIN / "stepscope"),
            "analyze",
            f"s3://{BUCKET}/{PREFIX}/{session}",
            "--endpoint",
            endpoint,
            "-o",
            str(out),
            "--allow-partial",  # hung ranks leave stacks and dumps, no trace: exit 3 without it
        ],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def _capture(
    name: str, workdir: Path, control: Path, sidecars: list[Sidecar], s3: tuple[str, Any], **options: Any
) -> Outcome:
    """One capture `name` on every rank of the running job; unless it only dumps on demand, once every hook is
    armed rank 2 is told to misbehave. Its session is analysed once every sidecar has ended it."""
    endpoint, client = s3
    session = f"{NAMESPACE}/fr-{name}-{FR_UID[:8]}"  # the only folder a team-a sidecar uploads a session to
    body = capture_body(f"cap-{name}", f"s3://{BUCKET}/{PREFIX}/{session}", endpoint, **options)
    body["session"] = {"namespace": NAMESPACE, "name": f"fr-{name}", "uid": FR_UID}
    for sc in sidecars:
        code, status = sc.call("POST", "/v1/captures", body)
        assert code == 202, status
    if not options.get("dumpOnly"):
        for i, sc in enumerate(sidecars):
            wait_for(lambda sc=sc, i=i: _hook_phase(sc, i) == "armed", 30, f"rank {i} armed")
        (control / "fault").write_text("")
    finals = [sc.wait_terminal(f"cap-{name}", 90) for sc in sidecars]
    manifests = []
    folder = parse_storage_uri(f"s3://{BUCKET}/{PREFIX}/{session}")
    for rank in range(WORLD):
        key = rank_artifact_key(folder, rank, MANIFEST_FILE)  # where the sidecars put it, in the current layout
        try:
            manifests.append(json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read()))
        except client.exceptions.NoSuchKey:
            manifests.append(None)
    return Outcome(_analyze(workdir, endpoint, session), finals, manifests)


def run(
    fault: str,
    workdir: Path,
    hook_path: Path,
    sidecars: list[Sidecar],
    s3: tuple[str, Any],
    *,
    dumped_healthy: bool = False,
    **options: Any,
) -> list[Outcome]:
    """A job of train_faults.py whose rank 2 misbehaves as `fault` says during a capture with `options`; with
    `dumped_healthy`, its Flight Recorders are first dumped on demand while every rank still trains (that capture's
    outcome first)."""
    job, control = _start_job(workdir, hook_path, sidecars, fault)
    outcomes = []
    try:
        if dumped_healthy:
            outcomes.append(_capture("healthy", workdir, control, sidecars, s3, dumpOnly=True, timeoutSeconds=30))
        outcomes.append(_capture(fault, workdir, control, sidecars, s3, **options))
    finally:
        (control / "stop").write_text("")
        job.stop_all()
    return outcomes


@pytest.fixture(scope="module")
def scenario(workdir: Path, hook_path: Path, sidecars: list[Sidecar], s3: tuple[str, Any]) -> Iterator[Any]:
    yield lambda fault, **options: run(fault, workdir, hook_path, sidecars, s3, **options)


HANG = {"skipSteps": 100_000, "steps": 5, "stepTimeoutSeconds": 3, "timeoutSeconds": 25}


@pytest.fixture(scope="module")
def stuck(scenario: Any) -> list[Outcome]:
    """The job whose rank 2 gets stuck in data loading, dumped on demand while it was healthy, then captured."""
    outcomes: list[Outcome] = scenario("stuck", dumped_healthy=True, **HANG)
    return outcomes


def test_a_rank_stuck_in_data_loading_is_named_with_the_collective_the_others_wait_in(stuck: list[Outcome]) -> None:
    out = stuck[1]
    assert [f["state"] for f in out.finals] == ["hung"] * WORLD
    for manifest in out.manifests:
        assert manifest is not None
        assert {"stacks.txt", "flight_recorder.json.gz"} <= {f["name"] for f in manifest["files"]}
        assert manifest["meta"]["flightRecorder"] == "written" and manifest["meta"]["dumpReason"] == "hang"
    d = out.diagnosis
    assert [(s["rank"], s["cause"]) for s in d["slow_ranks"]] == [(2, "hang")]
    [front] = d["flight_recorder"]["wavefronts"]
    assert (front["waiting_ranks"], front["missing_ranks"]) == ([0, 1, 3], [2])
    assert front["collective"]["op"] == "all_reduce" and front["collective"]["call_site"] == site("backward")
    hangs = {h["rank"]: h for h in d["hangs"]}
    assert hangs[2]["culprit"] and hangs[2]["location"] == "train_faults.py:29 in stuck_in_data_loader"
    assert all(hangs[r]["waiting_collective"] == "all_reduce" and not hangs[r]["culprit"] for r in (0, 1, 3))
    assert d["verdict"].startswith("Hang: ranks 0, 1, 3 wait in all_reduce")
    assert "rank 2 never reached it: it is stuck at train_faults.py:29 in stuck_in_data_loader" in d["verdict"]


def test_a_rank_that_calls_another_collective_is_named_with_the_mismatch(scenario: Any) -> None:
    [out] = scenario("collective", **HANG)
    d = out.diagnosis
    assert [(s["rank"], s["cause"]) for s in d["slow_ranks"]] == [(2, "desync")]  # a cause of its own
    [mismatch] = d["flight_recorder"]["mismatches"]
    assert (mismatch["kind"], mismatch["ranks"]) == ("op", [2])
    expected = "rank 2 called broadcast [1024] where ranks 0, 1, 3 called all_reduce [4], seq"
    assert mismatch["message"].startswith(expected) and d["verdict"].startswith(
        f"Desync (collective mismatch): {expected}"
    )
    hangs = {h["rank"]: h for h in d["hangs"]}
    assert hangs[2]["location"] == site("collective") and hangs[0]["location"] == site("metrics")


def test_a_rank_whose_process_died_is_named_with_the_collective_the_others_were_in(scenario: Any) -> None:
    # rank 2's sidecar waits out the capture deadline (a sidecar cannot see a process of another container die):
    # the shortest one the others' hang dumps (stepTimeoutSeconds 3) fit in with room to spare
    [out] = scenario("die", **(HANG | {"timeoutSeconds": 15}))
    assert out.finals[2]["state"] == "failed"  # its hook never answered: the capture deadline passed
    assert out.manifests[2] is not None and not out.manifests[2]["files"]
    d = out.diagnosis
    assert [(s["rank"], s["cause"]) for s in d["slow_ranks"]] == [(2, "hang")]
    [front] = d["flight_recorder"]["wavefronts"]
    assert front["missing_ranks"] == [2] and front["collective"]["call_site"] == site("backward")
    assert "rank 2 never reached it: it left neither stacks nor a Flight Recorder dump" in d["verdict"]


def test_a_healthy_jobs_dumps_on_demand_show_no_wavefront(stuck: list[Outcome]) -> None:
    out = stuck[0]  # before rank 2 was told to get stuck
    assert [f["state"] for f in out.finals] == ["uploaded"] * WORLD
    fr = out.diagnosis["flight_recorder"]
    assert fr["ranks"] == [0, 1, 2, 3]
    assert fr["wavefronts"] == [] and fr["mismatches"] == [] and fr["culprits"] == []
    assert out.diagnosis["slow_ranks"] == [] and out.diagnosis["hangs"] == []
    assert "no collective is held up" in out.diagnosis["verdict"]
