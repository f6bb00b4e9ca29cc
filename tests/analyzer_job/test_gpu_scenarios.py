"""Multi-rank GPU jobs derived from a real Kineto trace (fixtures/gpu_ddp_source.json.gz, see make_gpu_source.py)
through the collective timing model of stepscope_testing.gpu_jobs: a quiet job where a consistent compute
straggler costing ~7% of the step is found at default settings, balanced and uniformly slower jobs without a slow
rank, an unannotated host stall, slow memory copies on one rank (from the shared recommendation-model trace), and
GPU figures that hold together (phases add up, idle within its window)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_contract.report import Cause, Report
from stepscope_testing.gpu_jobs import GpuJob, write_job
from stepscope_testing.local_analysis import analyse_folder

pytestmark = pytest.mark.unit
SOURCE = str(Path(__file__).resolve().parent / "fixtures" / "gpu_ddp_source.json.gz")


def _analyse(job: GpuJob, tmp_path: Path) -> Report:
    return analyse_folder(write_job(job, tmp_path / job.name))


@pytest.mark.parametrize("seed", range(3))
def test_balanced_gpu_job_has_no_slow_rank(tmp_path: Path, seed: int) -> None:
    report = _analyse(GpuJob(name="balanced", source=SOURCE, world=8, repeat=2, seed=seed), tmp_path)
    assert report.diagnosis.slow_ranks == [], report.diagnosis.verdict


def test_uniformly_slower_gpu_job_has_no_slow_rank(tmp_path: Path) -> None:
    job = GpuJob(name="uniform", source=SOURCE, world=4, scale=dict.fromkeys(range(4), 1.3), repeat=2, seed=4)
    assert _analyse(job, tmp_path).diagnosis.slow_ranks == []


def test_seven_percent_compute_straggler_is_found_at_default_settings(tmp_path: Path) -> None:
    job = GpuJob(name="straggler", source=SOURCE, world=8, scale={5: 1.4}, repeat=2, seed=5)
    d = _analyse(job, tmp_path).diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(5, Cause.COMPUTE)], d.verdict
    slow = d.slow_ranks[0]
    assert 0.05 < slow.excess_us / d.median_step_us < 0.10  # it costs the job about 7% of a step
    assert slow.phase in ("forward", "backward")
    assert slow.effect_z is not None and slow.effect_z > 5


def test_unannotated_host_stall_on_a_gpu_rank(tmp_path: Path) -> None:
    job = GpuJob(name="host", source=SOURCE, world=4, host_stall_us={1: 25_000.0}, repeat=2, seed=6)
    report = _analyse(job, tmp_path)
    d = report.diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(1, Cause.HOST)], d.verdict
    r1 = next(r for r in report.ranks if r.rank == 1)
    others = [r.host_time for r in report.ranks if r.rank != 1]
    assert r1.host_time > max(others) + 20_000 * r1.steps.count * 0.8


def test_gpu_figures_hold_together(tmp_path: Path) -> None:
    report = _analyse(GpuJob(name="figures", source=SOURCE, world=2, repeat=2, seed=7), tmp_path)
    for r in report.ranks:
        assert r.device == "cuda" and r.gpu_utilization is not None and r.cpu_utilization is None
        assert r.idle_breakdown is not None
        idle = r.idle_breakdown.host_wait + r.idle_breakdown.kernel_wait + r.idle_breakdown.other
        assert idle == pytest.approx(r.idle_time) and idle <= r.window_us
        assert r.phases is not None and len(r.step_phases) == r.steps.count == 6
        assert sum(r.phases.model_dump().values()) == pytest.approx(r.steps.mean_us, rel=0.03)
        assert r.host_time > 0 and r.collective_wait_estimated


@pytest.mark.parametrize(("world", "rank", "factor"), [(4, 2, 4.0), (8, 5, 3.0)])
def test_slow_memory_copies_on_a_gpu_rank_are_memory(hta_traces: Path, tmp_path: Path, world: int, rank: int,
                                                     factor: float) -> None:  # fmt: skip
    """One rank's copies alone take 3-4x as long (pageable host memory): the excess shows in its input phase
    (host time) but is GPU memory ops, so the cause is memory, and the evidence names each copy once."""
    source = str(hta_traces / "nccl_8rank_rank3.json.gz")  # a recommendation model: ~12% of a step in copies
    job = GpuJob(name="copies", source=source, world=world, copy_scale={rank: factor}, seed=world)
    d = _analyse(job, tmp_path).diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(rank, Cause.MEMORY)], d.verdict
    names = [e.metric for e in d.slow_ranks[0].evidence if e.metric.startswith("Memcpy")]
    assert names and len(names) == len(set(names))
    assert "memory copies" in d.verdict


def test_slower_gpu_including_its_copies_is_still_compute(hta_traces: Path, tmp_path: Path) -> None:
    """A rank whose kernels and copies are all 1.3x slower (a throttled GPU): compute, not memory."""
    job = GpuJob(name="throttled", source=str(hta_traces / "nccl_8rank_rank3.json.gz"), world=4, scale={1: 1.3})
    d = _analyse(job, tmp_path).diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(1, Cause.COMPUTE)], d.verdict
