"""Mixture-of-experts GPU jobs written as NCCL Kineto traces from the timing model of
stepscope_testing.gpu_moe_jobs, analysed end to end as a user would: tokens routed to hot experts are an expert
imbalance (a finding with its evidence, remedy and gain), not slow workers; even routing is healthy; a GPU slow for
another reason in an MoE job is a slow worker, not an expert imbalance."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_contract.report import Cause, Report
from stepscope_testing.corpus import moe_jobs
from stepscope_testing.gpu_moe_jobs import GpuMoeJob, write_job
from stepscope_testing.local_analysis import analyse_folder

pytestmark = pytest.mark.unit
SCENARIOS = {s.name: s.job for s in moe_jobs() if isinstance(s.job, GpuMoeJob)}


def _analyse(job: GpuMoeJob, tmp_path: Path) -> Report:
    return analyse_folder(write_job(job, tmp_path / job.name))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_diagnosis_is_the_truth(name: str, tmp_path: Path) -> None:
    truth = SCENARIOS[name].truth()
    d = _analyse(SCENARIOS[name], tmp_path).diagnosis
    assert sorted((s.rank, s.cause.value) for s in d.slow_ranks) == [
        (s["rank"], s["cause"]) for s in truth["slow_ranks"]
    ], d.verdict
    assert sorted(f.cause.value for f in d.findings) == truth["findings"], d.verdict


def test_hot_experts_are_named_with_their_volume_remedy_and_gain(tmp_path: Path) -> None:
    report = _analyse(SCENARIOS["gpu-ep8-moe-hot-experts"], tmp_path)
    d = report.diagnosis
    a2a = next(c for c in report.ranks[3].collectives if c.op == "all_to_all")
    assert a2a.elems > 0 and a2a.process_group == "1:mesh_ep"
    f = next(f for f in d.findings if f.cause is Cause.EXPERT_IMBALANCE)
    assert f.ranks == [3, 6]
    volume = next(e for e in f.evidence if e.metric == "all-to-all elements per step")
    # sent + received in the dispatch and the combine, rank 3 routed 2.0 of the 9.6 shares' tokens, rank 0 1.0
    hot, even = 1 + 8 * 2.0 / 9.6 + 2.0 + 1, 1 + 8 * 1.0 / 9.6 + 1.0 + 1
    assert volume.value / volume.baseline == pytest.approx(hot / even, rel=0.02)
    wait = next(e for e in f.evidence if e.metric == "all-to-all time per step")
    assert wait.value < 0.5 * wait.baseline  # the others wait for the hot ranks
    assert "capacity factor" in f.remedy and "load-balancing loss" in f.remedy and "placement" in f.remedy
    assert 0 < f.gain_us < d.median_step_us and d.expected_step_us == pytest.approx(d.median_step_us - f.gain_us)
    assert "expert_imbalance" in d.verdict and "Ranks 3,6" in d.verdict
