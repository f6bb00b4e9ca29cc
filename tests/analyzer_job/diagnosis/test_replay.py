"""What-if replay of a pipeline job's steps through their dependencies (1F1B order, P2P edges, the replicas'
join): the step time if the slow worker ran like its peers, if the stages were balanced, if every step's work took
its median, each checked against the same job generated with the change; host work counts as work."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.replay import StepWork, replay_step
from stepscope_contract.report import Cause
from stepscope_testing.pipeline_summaries import PipeShape, pipeline_job

pytestmark = pytest.mark.unit


def _step(shape: PipeShape) -> float:
    return float(np.median(pipeline_job(shape)[0].steps.durations_us))


def test_one_1f1b_step_takes_microbatches_plus_stages_minus_one_slots() -> None:
    job = StepWork(stages=2, replicas=1, microbatches=2, cells={(0, 0): 0, (1, 0): 1}, steps=[])
    even, slow = {0: (2.0, 4.0, 0.0), 1: (2.0, 4.0, 0.0)}, {0: (2.0, 4.0, 0.0), 1: (4.0, 8.0, 0.0)}
    assert replay_step(job, even) == pytest.approx(9.0)  # (M + S - 1) x (F + B)
    assert replay_step(job, slow) == pytest.approx(15.0)  # the slow stage sets the pace
    host = {0: (2.0, 4.0, 0.0), 1: (2.0, 4.0, 3.0)}
    assert replay_step(job, host) == pytest.approx(10.0)  # the last stage ends at 7, then 3 of host work


def test_balanced_stages_replay_to_the_balanced_jobs_step() -> None:
    heavy = PipeShape(pp=4, dp=2, microbatches=8, stage_scale={3: 1.65})
    d = diagnose(pipeline_job(heavy))
    balanced = _step(PipeShape(pp=4, dp=2, microbatches=8, stage_scale=dict.fromkeys(range(4), 0.75 + 1.65 / 4)))
    w = next(w for w in d.what_if if w.kind == "balanced_stages")
    assert w.step_us == pytest.approx(balanced, rel=0.05)
    stage = next(f for f in d.findings if f.cause is Cause.STAGE_IMBALANCE)
    assert stage.gain_us == w.gain_us and d.expected_step_us == pytest.approx(w.step_us, rel=0.01)


def test_the_slow_worker_like_its_peers_replays_to_the_healthy_jobs_step() -> None:
    d = diagnose(pipeline_job(PipeShape(pp=4, dp=4, rank_scale={13: 1.5}, wait_as_host=True)))
    healthy = _step(PipeShape(pp=4, dp=4, wait_as_host=True))
    w = next(w for w in d.what_if if w.kind == "like_peers")
    assert w.change == "rank 13 ran like its peers" and w.step_us == pytest.approx(healthy, rel=0.05)


def test_a_healthy_pipeline_gains_nothing_worth_naming() -> None:
    d = diagnose(pipeline_job(PipeShape(pp=2, dp=2, microbatches=8)))
    assert [w.kind for w in d.what_if] == ["balanced_stages", "median_work"]
    assert all(abs(w.gain_us) < 0.05 * d.median_step_us for w in d.what_if)


def test_host_work_is_replayed_so_the_gain_is_the_excess() -> None:
    """Item 4: rank 3 runs 25 ms of Python each step before its stage's join. The replay holds each rank's host
    work, so rank 3 like its peers replays to the healthy job's step, and the verdict's excess, its expected step
    and its "x faster" are that one gain."""
    d = diagnose(pipeline_job(PipeShape(pp=2, dp=2, rank_host={3: 25_000.0}, device="cpu")))
    healthy = _step(PipeShape(pp=2, dp=2, device="cpu"))
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(3, Cause.HOST)]
    w = next(w for w in d.what_if if w.kind == "like_peers")
    assert w.step_us == pytest.approx(healthy, rel=0.03) and w.gain_low_us > 0
    assert d.slow_ranks[0].excess_us == w.gain_us
    assert d.expected_step_us == pytest.approx(w.step_us, rel=0.01)
    assert d.estimated_speedup == pytest.approx(d.median_step_us / w.step_us, rel=0.01)
