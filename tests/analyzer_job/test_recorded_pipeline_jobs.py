"""The analyzer on a real pipeline-parallel job recorded with plain torch.profiler (fixtures/pipeline_jobs, see its
README): every rank analysed as one job although each lists only its own process groups, the layout read from
them, the slow worker named against its peer, the schedule's bubble named, and no stage called imbalanced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_contract.report import Report

pytestmark = pytest.mark.unit

JOBS = Path(__file__).parent / "fixtures" / "pipeline_jobs"


def _analyse(name: str) -> Report:
    layout = discover(LocalStore(), location_of(str(JOBS / name)))
    return reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=layout.session, notes=layout.notes)


def test_a_real_pipeline_job_is_one_job_with_its_layout() -> None:
    report = _analyse("cpu-pp2dp2-slow-worker")
    assert [r.status.value for r in report.ranks] == ["ok"] * 4, [r.error for r in report.ranks]
    assert not any("different jobs" in n for n in report.notes)
    groups = {r.rank: sorted(tuple(g.ranks) for g in r.process_groups if g.ranks) for r in report.ranks}
    assert groups[0] == [(0, 1), (0, 2)] and groups[3] == [(1, 3), (2, 3)]
    d = report.diagnosis
    assert d.ranks_analysed == 4 and d.layout is not None
    assert d.layout.summary == "4 ranks = 2 stages x 2 replicas, from process groups"
    assert d.layout.microbatches == 2
    assert [(x.rank, x.stage, x.replica) for x in d.layout.ranks] == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)]


def test_the_slow_worker_is_named_against_its_peer() -> None:
    report = _analyse("cpu-pp2dp2-slow-worker")
    truth = json.loads((JOBS / "cpu-pp2dp2-slow-worker" / "truth.json").read_text())
    d = report.diagnosis
    assert sorted((s.rank, s.cause.value) for s in d.slow_ranks) == [(2, "compute")], d.verdict
    assert sorted(f.cause.value for f in d.findings) == truth["findings"] == ["pipeline_bubble"]
    peers = next(e for e in d.slow_ranks[0].evidence if e.metric == "peers")
    assert "(rank 3)" in peers.detail
    assert any(w.change == "rank 2 ran like its peers" and w.gain_us > 0 for w in d.what_if)
