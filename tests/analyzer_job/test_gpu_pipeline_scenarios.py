"""3D-parallel GPU jobs (pipeline x data x tensor parallel) written as NCCL Kineto traces from the 1F1B timing
model of stepscope_testing.gpu_pipeline_jobs, analysed end to end as a user would: each of the corpus' GPU pipeline
scenarios gets its truth (slow ranks with their cause, the job-shape findings, the layout's stages and replicas);
a slow GPU's fast peers that wait on the host with their GPU idle are waiting, not host stragglers."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_contract.report import Report
from stepscope_testing.corpus import gpu_pipelines
from stepscope_testing.gpu_pipeline_jobs import GpuPipeJob, write_job
from stepscope_testing.local_analysis import analyse_folder

pytestmark = pytest.mark.unit
SCENARIOS = {s.name: s.job for s in gpu_pipelines() if isinstance(s.job, GpuPipeJob)}


def _analyse(job: GpuPipeJob, tmp_path: Path) -> Report:
    return analyse_folder(write_job(job, tmp_path / job.name))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_diagnosis_is_the_truth(name: str, tmp_path: Path) -> None:
    job = SCENARIOS[name]
    truth = job.truth()
    d = _analyse(job, tmp_path).diagnosis
    assert sorted((s.rank, s.cause.value) for s in d.slow_ranks) == [
        (s["rank"], s["cause"]) for s in truth["slow_ranks"]
    ], d.verdict
    assert sorted(f.cause.value for f in d.findings) == truth["findings"], d.verdict
    assert d.layout is not None and (d.layout.stages, d.layout.replicas, d.layout.tp) == (job.pp, job.dp, job.tp)


def test_the_fast_peers_waiting_on_the_host_are_not_host_stragglers(tmp_path: Path) -> None:
    report = _analyse(SCENARIOS["gpu-pp4dp4-slow-worker-host-wait"], tmp_path)
    fast_last_stage = [r for r in report.ranks if r.rank in (12, 14, 15)]
    assert all(r.phases is not None and r.phases.other > 10_000.0 for r in fast_last_stage)  # idle GPU: host time
    assert [(s.rank, s.cause.value) for s in report.diagnosis.slow_ranks] == [(13, "compute")]
