"""A pipeline job's shape compared as such: a heavy stage is a stage imbalance (move layers), not two slow ranks;
warm-up and cool-down of a GPipe or 1F1B schedule with few microbatches are a bubble; microbatches of varying length
with no persistent rank are a data imbalance, not stragglers. Each with its evidence, remedy and estimated gain; a
healthy pipeline has none."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.layout import job_layout
from stepscope_analyzer.diagnosis.pipeline_findings import stage_imbalance
from stepscope_analyzer.diagnosis.rank_costs import with_collective_waits
from stepscope_analyzer.diagnosis.slow_ranks import find_slow_ranks
from stepscope_contract.report import CallFloors, Cause, RankReport
from stepscope_testing.pipeline_summaries import PipeShape, pipeline_job

pytestmark = pytest.mark.unit


def _causes(shape: PipeShape) -> list[Cause]:
    return [f.cause for f in diagnose(pipeline_job(shape)).findings]


def test_a_heavy_last_stage_is_a_stage_imbalance() -> None:
    """pp4 x dp2, the last stage holding layers for 1.65x the others' compute (8 microbatches: no bubble)."""
    ranks = pipeline_job(PipeShape(pp=4, dp=2, microbatches=8, stage_scale={3: 1.65}))
    d = diagnose(ranks)
    assert d.slow_ranks == []
    assert [f.cause for f in d.findings] == [Cause.STAGE_IMBALANCE]
    f = d.findings[0]
    assert f.stage == 3 and f.ranks == [6, 7]
    assert "pipeline stage 3 (rank 6-7) computes 1.6" in f.summary
    assert f.remedy.startswith("Move layers from the heavy stage (rank 6-7)")
    assert len(f.evidence) == 4 and all("stage" in e.metric for e in f.evidence)
    # balanced stages: the pipeline would run at the mean stage's pace instead of the heaviest's
    assert 0.1 * d.median_step_us < f.gain_us < 0.5 * d.median_step_us
    assert d.expected_step_us == pytest.approx(d.median_step_us - f.gain_us)
    assert d.verdict.startswith("Pipeline stage 3 (rank 6-7) computes")
    assert "cause stage_imbalance" in d.verdict and "8 ranks = 4 stages x 2 replicas" in d.verdict
    assert d.next_steps[0] == f.remedy


def test_stages_within_the_ratio_are_not_imbalanced() -> None:
    assert _causes(PipeShape(pp=4, dp=2, microbatches=8, stage_scale={3: 1.15})) == []


def test_few_microbatches_leave_a_bubble() -> None:
    d = diagnose(pipeline_job(PipeShape(pp=4, dp=2, microbatches=4)))
    assert [f.cause for f in d.findings] == [Cause.PIPELINE_BUBBLE]
    f = d.findings[0]
    assert "4 stages with 4 microbatches idle 43%" in f.summary
    assert "1F1B" not in f.summary and "GPipe" not in f.summary  # both idle as long; the trace does not say which
    assert f.evidence[0].value == pytest.approx(3 / 7) and f.evidence[0].baseline == pytest.approx(3 / 11)
    assert f.gain_us == pytest.approx(d.median_step_us * (3 / 7 - 3 / 11), rel=0.01)
    assert f.remedy == cause_row(Cause.PIPELINE_BUBBLE).next_step.format(r="0-7")


def test_enough_microbatches_leave_no_bubble_worth_naming() -> None:
    assert _causes(PipeShape(pp=4, dp=2, microbatches=8)) == []
    assert _causes(PipeShape(pp=2, dp=2, microbatches=4)) == []


def test_varying_sequence_lengths_are_a_data_imbalance_not_stragglers() -> None:
    """pp2 x dp8, microbatches of varying length per replica and step, a heavier last stage (1.2x)."""
    ranks = pipeline_job(PipeShape(pp=2, dp=8, steps=8, microbatch_spread=0.6, stage_scale={1: 1.2}))
    assert find_slow_ranks(with_collective_waits(ranks), DiagnosisConfig())  # against every rank: noise as stragglers
    d = diagnose(ranks)
    assert d.slow_ranks == []
    assert [f.cause for f in d.findings] == [Cause.DATA_IMBALANCE]
    f = d.findings[0]
    assert f.gain_us > DiagnosisConfig().floor_us(d.median_step_us)
    assert "bucket sequences by length" in f.remedy
    assert f.evidence[0].unit == "cv" and f.evidence[0].value >= 0.15


def test_a_healthy_pipeline_has_no_findings() -> None:
    for seed in range(5):
        d = diagnose(pipeline_job(PipeShape(pp=4, dp=2, microbatches=8, seed=seed)))
        assert d.slow_ranks == [] and d.findings == [], d.verdict
        assert d.verdict.startswith("No slow rank") and "4 stages x 2 replicas" in d.verdict


def test_the_floor_applies_to_what_the_job_pays() -> None:
    """On shared CPU cores a stage's tested compute (contention taken out) may sit below the user's floor of a step
    the contention stretched; its wall-clock excess is what the floor applies to."""
    layout = job_layout(pipeline_job(PipeShape(pp=2, dp=2, steps=2)))
    assert layout is not None
    tested = {0: np.full(4, 20_000.0), 1: np.full(4, 21_000.0), 2: np.full(4, 50_000.0), 3: np.full(4, 52_000.0)}
    wall = {r: v * 4 for r, v in tested.items()}
    cfg, step = DiagnosisConfig(), 1_000_000.0  # floor: 50 ms; tested excess 30 ms, wall-clock excess 120 ms
    assert stage_imbalance(layout, tested, step, 4, cfg, threshold=1.8) is None
    found = stage_imbalance(layout, tested, step, 4, cfg, threshold=1.8, wall=wall)
    assert found is not None and found.stage == 1 and found.ranks == [2, 3]


def _with_floors(ranks: list[RankReport], odd_factor: float) -> list[RankReport]:
    """CPU ranks whose 40 op calls take their least time in even steps and `odd_factor` times it in odd ones."""
    floors = [1_000.0 + 10.0 * k for k in range(40)]
    out = []
    for r in ranks:
        f = CallFloors(calls=[f"aten::addmm#{k}" for k in range(40)], floor_us=floors, even_us=floors,
                       odd_us=[x * odd_factor for x in floors], steps=r.steps.count)  # fmt: skip
        out.append(r.model_copy(update={"call_floors": f}))
    return out


def test_on_cpu_ranks_inputs_that_vary_show_in_the_call_floors() -> None:
    """The contention correction divides longer steps out on CPU ranks; the op calls' least times in even and odd
    steps tell inputs that vary (the same calls 2x apart) from fixed-shape work (equal)."""
    ranks = pipeline_job(PipeShape(pp=2, dp=4, steps=8, microbatch_spread=0.6, device="cpu"))
    varying = diagnose(_with_floors(ranks, 2.0))
    assert [f.cause for f in varying.findings] == [Cause.DATA_IMBALANCE]
    assert "differs by 2.00x between even and odd steps" in varying.findings[0].summary
    assert diagnose(_with_floors(ranks, 1.0)).findings == []


def _with_work(ranks: list[RankReport], work: dict[int, float]) -> list[RankReport]:
    """CPU ranks whose op calls at their least time add up to `work[stage]` µs per step (the listed calls alone
    hold a tenth of it: the total counts every call)."""
    layout = job_layout(ranks)
    assert layout is not None
    out = []
    for r in ranks:
        total = work[layout.stage[r.rank]]
        listed = [total / 10 / 40] * 40
        f = CallFloors(calls=[f"aten::addmm#{k}" for k in range(40)], floor_us=listed, even_us=listed,
                       odd_us=listed, steps=r.steps.count, total_us=total)  # fmt: skip
        out.append(r.model_copy(update={"call_floors": f}))
    return out


def test_cpu_stages_are_compared_by_their_op_work() -> None:
    """pp2 x dp2 on CPU ranks, stage 1 computing 1.3x stage 0 per step (under the 1.8x that compute on CPU ranks
    is held to, where waiting for a CPU stretches stages unevenly): stage 1's op calls at their least time add up
    to 1.5x stage 0's, a stage imbalance at the GPU's 1.3x; equal op work is none, and so is a 1.2x one."""
    ranks = pipeline_job(PipeShape(pp=2, dp=2, microbatches=8, device="cpu", stage_scale={1: 1.3}))
    heavy = diagnose(_with_work(ranks, {0: 20_000.0, 1: 30_000.0}))
    [stage] = [f for f in heavy.findings if f.cause is Cause.STAGE_IMBALANCE]
    assert stage.stage == 1 and stage.ranks == [2, 3] and heavy.slow_ranks == []
    assert "does 1.50x the other stages' op work per step (its op calls at their least time: 30.0 ms vs 20.0 ms)" in (
        stage.summary
    )
    for work in ({0: 20_000.0, 1: 20_000.0}, {0: 20_000.0, 1: 24_000.0}):
        assert not [f for f in diagnose(_with_work(ranks, work)).findings if f.cause is Cause.STAGE_IMBALANCE]
