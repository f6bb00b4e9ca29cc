"""The diagnosis of a small gloo job recorded live through stepscope's own in-process hook (a request file as the
sidecar writes it; torch.profiler in four real processes, nothing annotated by hand): a plain-Python stall before
forward on one rank is found as host time, named by phase, node and place. The other planted causes are diagnosed on
recordings (test_recorded_gloo_jobs.py); the whole scenario corpus runs in bench/diagnosis_accuracy.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_contract.report import Cause, Report
from stepscope_testing.gloo_jobs import GlooJob, run_job

pytestmark = [pytest.mark.integration, pytest.mark.solo, pytest.mark.timeout(300)]


def _analyse(job: GlooJob, tmp_path: Path) -> Report:
    folder = run_job(job, tmp_path / job.name, timeout_s=240)
    layout = discover(LocalStore(), location_of(str(folder)))
    return reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=layout.session, notes=layout.notes)


def test_plain_python_stall_before_forward_is_found_and_placed(tmp_path: Path) -> None:
    job = GlooJob(name="python", world=4, fault="python", slow_ranks=(2,), amount=50, steps=6, capture="hook",
                  batch=64)  # fmt: skip
    report = _analyse(job, tmp_path)
    d = report.diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.HOST)], d.verdict
    slow = d.slow_ranks[0]
    assert slow.phase == "other" and slow.node == "node-1"
    place = next(e for e in slow.evidence if e.metric.startswith("host time between"))
    assert "DistributedDataParallel.forward" in place.metric
    assert d.verdict.startswith("Rank 2 on node node-1 slows the job") and "4 of 4 ranks analysed" in d.verdict
