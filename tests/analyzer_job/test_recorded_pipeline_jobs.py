"""The analyzer on a real pipeline-parallel job recorded with plain torch.profiler (fixtures/pipeline_jobs, see its
README): every rank analysed as one job although each lists only its own process groups, the layout read from
them, the slow worker named against its peer, the schedule's bubble named, and no stage called imbalanced."""

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

JOBS = Path(__file__).parent / "fixtures" / "pipeline_jobs"


@functools.cache  # each recorded job is analysed once per module; the tests only read its report
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


def test_the_ranks_that_wait_for_the_slow_worker_are_found_from_matched_calls() -> None:
    """pp2 x dp2, rank 2 (stage 1, replica 0) slow: rank 0 (stage 0 of its replica) waits for its gradients in a
    receive, rank 3 (its data-parallel peer) for it in the gradients' all_reduce; the verdict says so."""
    d = _analyse("cpu-pp2dp2-slow-worker").diagnosis
    (slow,) = d.slow_ranks
    assert {(w.rank, w.via) for w in slow.waiters} == {
        (0, "recv from it"),
        (3, "allreduce with its data-parallel peers"),
    }
    assert "ranks 0 and 3 wait for it (" in d.verdict, d.verdict
    waits = {w.rank: w for w in d.waits}
    assert waits[0].waits_for[0].rank == 2 and waits[3].waits_for[0].rank == 2


def test_a_middle_stage_is_waited_for_through_the_pipeline_without_recorded_peers() -> None:
    """pp4 x dp2, rank 5 (stage 2, replica 1) slow: gloo names no peer, so each receive's direction comes from the
    work after it; rank 3 (stage 1, a middle stage itself) and rank 7 (stage 3) wait for rank 5 in their receives,
    rank 4 (its peer in replica 0) in the all_reduce."""
    report = _analyse("cpu-pp4dp2-slow-worker")
    d = report.diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(5, "compute")], d.verdict
    vias = {w.rank: w.via for w in d.slow_ranks[0].waiters}
    assert vias == {3: "recv from it", 7: "recv from it", 4: "allreduce with its data-parallel peers"}, vias
    assert all(r.comm_calls is None for r in report.ranks)  # the calls stay out of report.json
