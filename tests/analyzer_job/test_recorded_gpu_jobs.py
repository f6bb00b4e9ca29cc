"""The analyzer on real GPU jobs recorded with stepscope's own hook and the sidecar's NVML sampler
(fixtures/gpu_jobs, made by tools/record_gpu_jobs.py on one NVIDIA H200: torch 2.11 + CUDA 13, DDP over gloo, the
ranks sharing the GPU; each folder's truth.json says what was planted and how it was recorded). Each job's verdict
names exactly the planted slow rank and its cause, or none; a rank's GPU idle time while its gloo all-reduce is in
flight is waiting for the others, not host time; the NVML samples of the window are in each rank's summary."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_contract.report import Report

pytestmark = pytest.mark.unit

JOBS = Path(__file__).parent / "fixtures" / "gpu_jobs"
VERDICT_JOBS = sorted(t.parent.name for t in JOBS.glob("*/truth.json") if not json.loads(t.read_text()).get("hang"))


@functools.cache  # each recorded job is analysed once per module; the tests only read its report
def _analyse(name: str) -> Report:
    layout = discover(LocalStore(), location_of(str(JOBS / name)))
    return reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=layout.session, notes=layout.notes)


def _truth(name: str) -> dict[str, object]:
    truth: dict[str, object] = json.loads((JOBS / name / "truth.json").read_text())
    return truth


@pytest.mark.parametrize("name", VERDICT_JOBS)
def test_the_verdict_names_what_was_planted(name: str) -> None:
    report = _analyse(name)
    truth = _truth(name)
    planted = truth["slow_ranks"]
    assert isinstance(planted, list)
    found = [(s.rank, s.cause.value) for s in report.diagnosis.slow_ranks]
    assert found == [(p["rank"], p["cause"]) for p in planted], report.diagnosis.verdict
    world = len(list((JOBS / name).glob("**/*.pt.trace.json.gz")))
    assert report.diagnosis.ranks_analysed == world and not report.errors
    assert all(r.device == "cuda" and r.kernel_time > 0 for r in report.ranks)


def test_gpu_idle_time_during_a_host_side_all_reduce_is_waiting_for_the_others() -> None:
    # rank 0 sleeps 30 ms after each optimizer step; rank 1's GPU idles meanwhile, inside gloo's all-reduce
    ranks = {r.rank: r for r in _analyse("gpu-2r-sleep").ranks}
    sleeper, waiter = ranks[0].phases, ranks[1].phases
    assert sleeper is not None and waiter is not None
    assert waiter.communication_wait > 25_000 > sleeper.communication_wait
    assert sleeper.other > 25_000 > waiter.other


def test_the_sleeping_ranks_cost_is_the_sleep() -> None:
    d = _analyse("gpu-2r-sleep").diagnosis
    (slow,) = d.slow_ranks
    assert slow.phase == "other" and 25_000 < slow.excess_us < 35_000, slow


def test_an_intermittent_stall_on_a_gpu_rank_lists_its_steps() -> None:
    (slow,) = _analyse("gpu-4r-periodic").diagnosis.slow_ranks
    assert slow.rank == 1 and slow.stalled_steps and len(slow.stalled_steps) >= 2
    assert slow.stall_us is not None and slow.stall_us > 150_000  # 200 ms planted every 3rd step


def test_a_two_rank_desync_says_where_each_rank_waits_and_blames_neither() -> None:
    # rank 1 entered a barrier while rank 0 all-reduces its gradients: one rank on each side, no majority to go by
    d = _analyse("gpu-2r-hang").diagnosis
    hangs = {h.rank: h for h in d.hangs}
    assert set(hangs) == {0, 1} and not d.slow_ranks
    assert (
        hangs[0].waiting_collective == "backward (DDP gradient all-reduce)" and hangs[1].waiting_collective == "barrier"
    )
    assert d.verdict.startswith("Desync: the ranks wait in different collectives (rank 0 in backward"), d.verdict
    assert "rank 1 in barrier (issued at gloo_jobs.py:" in d.verdict and "cannot tell which one diverged" in d.verdict


def test_each_ranks_nvml_samples_cover_its_window() -> None:
    for rank in _analyse("gpu-2r-compute").ranks:
        metrics, env = rank.gpu_metrics, rank.environment
        assert env is not None and env.torch_version == "2.11.0+cu130" and env.gpu_metrics_status == "captured"
        assert metrics is not None and metrics.samples > 0
        assert metrics.name == "NVIDIA H200"
