"""Step telemetry end to end in real processes: a training loop with the hook (through PYTHONPATH only) and its
sidecar. `GET /v1/steps` serves the recent steps (token required, bounded `last`), `/metrics` carries the step metrics
in the exposition format prometheus_client's parser reads, and the telemetry survives a sidecar restart: a new
sidecar on the same volume continues the same histogram and serves the steps recorded while none was running."""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prometheus_client.parser import text_string_to_metric_families
from sidecar_harness import HERE, TOKEN, Procs, Sidecar, base_env, start_sidecar, wait_for

from stepscope_contract.step_telemetry import PodSteps

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def training(procs: Procs, workdir: Path, hook_path: Path, token_file: Path) -> Iterator[tuple[Sidecar, Path]]:
    control = workdir / "control-steps"
    control.mkdir()
    sc = start_sidecar(procs, workdir, token_file, "steps")
    env = base_env() | {
        "PYTHONPATH": str(hook_path),
        "STEPSCOPE_HOOK_DIR": str(sc.hook_dir),
        "TRAIN_CONTROL_DIR": str(control),
        "TRAIN_MAX_SECONDS": "240",
    }
    procs.start([sys.executable, str(HERE / "train_explicit.py")], env, workdir / "train-steps.log")
    yield sc, control
    (control / "stop").write_text("")


def steps(sc: Sidecar, last: int = 50) -> PodSteps:
    code, body = sc.call("GET", f"/v1/steps?last={last}")
    assert code == 200, body
    return PodSteps.model_validate(body)


def scrape(sc: Sidecar) -> dict[str, float]:
    """The step metrics of rank 0, by sample name (and `le` for buckets)."""
    req = urllib.request.Request(sc.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("stepscope_s") and sample.labels.get("rank") == "0":
                key = sample.name + (f"{{le={sample.labels['le']}}}" if "le" in sample.labels else "")
                out[key] = sample.value
    return out


def test_recent_steps_are_served_with_the_token_only(training: tuple[Sidecar, Path]) -> None:
    sc, _ = training
    got = wait_for(lambda: (s := steps(sc)).ranks and len(s.ranks[0].duration_ms) >= 20 and s, 240, "20 steps")
    (rank,) = got.ranks
    assert rank.rank == 0 and rank.world_size == 1 and rank.pid > 0 and not rank.closed
    assert len(rank.duration_ms) == len(rank.backward_ms) == len(rank.ended_at) == len(rank.profiled) <= 50
    assert all(d >= 20.0 for d in rank.duration_ms), rank.duration_ms  # the loop sleeps 20 ms per step
    assert all(0 < b < d for b, d in zip(rank.backward_ms, rank.duration_ms, strict=True))
    assert rank.seconds_since_last_step is not None and rank.seconds_since_last_step < 30
    assert sc.call("GET", "/v1/steps", token=None)[0] == 401
    assert sc.call("GET", "/v1/steps", token="wrong")[0] == 401
    for bad in ("0", "100000", "x", "%C2%B2", "1" * 40):  # "²" on the wire is %C2%B2 (a client cannot send it raw)
        assert sc.call("GET", f"/v1/steps?last={bad}")[0] == 400


def test_metrics_parse_and_survive_a_sidecar_restart(
    training: tuple[Sidecar, Path], procs: Procs, workdir: Path, token_file: Path
) -> None:
    sc, _ = training
    before = wait_for(lambda: (m := scrape(sc)).get("stepscope_step_duration_seconds_count", 0) >= 10 and m, 240, "10")
    assert before["stepscope_step_duration_seconds_bucket{le=+Inf}"] == before["stepscope_step_duration_seconds_count"]
    assert 0.02 <= before["stepscope_step_median_seconds"] < 5
    assert 0 < before["stepscope_steps_per_second"] <= 50
    assert before["stepscope_seconds_since_last_step"] < 30
    seen = steps(sc, 2048).ranks[0].steps_total

    os.killpg(sc.proc.pid, signal.SIGKILL)  # the sidecar dies; the training goes on stepping
    sc.proc.wait(30)
    time.sleep(1.0)
    again = start_sidecar(procs, workdir, token_file, "steps")
    assert again.hook_dir == sc.hook_dir
    after = scrape(again)
    assert after["stepscope_step_duration_seconds_count"] > before["stepscope_step_duration_seconds_count"]
    assert after["stepscope_step_duration_seconds_sum"] > before["stepscope_step_duration_seconds_sum"]
    series = steps(again, 2048).ranks[0]
    assert series.steps_total > seen  # it counted on while no sidecar ran
    assert len(series.duration_ms) >= min(series.steps_total, 2048) - 1  # and the steps before the restart are there
