"""The job's gain comes from the what-if replay for every job: the expected step of the verdict, the report's
gain sentence, report.json and the status summary are the replayed step of every slow rank like its peers."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.replayed_gain import clears_noise
from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.report.build import build_report
from stepscope_analyzer.report.gain import gain_sentence, step_duration
from stepscope_contract.report import Cause, Diagnosis, RankReport, WhatIf
from stepscope_testing.pipeline_summaries import PipeShape, pipeline_job
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


def _same_figure_everywhere(ranks: list[RankReport], d: Diagnosis, w: WhatIf) -> None:
    assert d.expected_step_us == pytest.approx(w.step_us, abs=0.1)
    assert d.estimated_speedup == pytest.approx(d.median_step_us / w.step_us, rel=1e-3)
    sentence = gain_sentence(d)
    assert sentence is not None and f"~{step_duration(w.step_us)} instead of" in sentence
    assert f"~{w.step_us / 1000:,.1f} ms" in d.verdict
    summary = build_status_summary(build_report(ranks, d))
    assert summary.estimated_speedup == round(d.estimated_speedup or 0.0, 3)


def test_two_slow_data_parallel_ranks_take_the_replay_of_both_like_their_peers() -> None:
    extra = {2: {"compute": 30_000.0}, 5: {"compute": 20_000.0}}
    ranks = synthetic_job(JobShape(), extra=extra)
    d = diagnose(ranks)
    healthy = diagnose(synthetic_job(JobShape()))
    assert {s.rank for s in d.slow_ranks} == {2, 5}
    both = next(w for w in d.what_if if w.kind == "all_like_peers")
    assert both.change == "every slow rank ran like its peers"
    assert both.step_us == pytest.approx(healthy.median_step_us, rel=0.05)
    one = min(w.step_us for w in d.what_if if w.kind == "like_peers")
    assert both.step_us < one  # fixing one leaves the other holding the step up
    _same_figure_everywhere(ranks, d, both)


def test_one_slow_data_parallel_rank_takes_its_replay() -> None:
    ranks = synthetic_job(JobShape(), slow_rank=3, cause=Cause.HOST, extra_us=25_000.0)
    d = diagnose(ranks)
    _same_figure_everywhere(ranks, d, next(w for w in d.what_if if w.kind == "like_peers"))


def test_two_slow_pipeline_workers_take_the_1f1b_replay_of_both_like_their_peers() -> None:
    ranks = pipeline_job(PipeShape(pp=4, dp=4, rank_scale={13: 1.5, 6: 1.4}))
    d = diagnose(ranks)
    assert {s.rank for s in d.slow_ranks} == {6, 13}
    both = next(w for w in d.what_if if w.kind == "all_like_peers")
    assert both.step_us < min(w.step_us for w in d.what_if if w.kind == "like_peers")
    _same_figure_everywhere(ranks, d, both)


@pytest.mark.parametrize(
    "ranks",
    [
        synthetic_job(JobShape(), extra={2: {"compute": 30_000.0}, 5: {"compute": 20_000.0}}),
        pipeline_job(PipeShape(pp=4, dp=4, rank_scale={13: 1.5, 6: 1.4})),
    ],
    ids=["data-parallel", "pipeline"],
)
def test_several_slow_ranks_share_out_their_combined_gain(ranks: list[RankReport]) -> None:
    """Each slow rank's excess is its share of the replay of every slow rank like its peers (its saving added when
    it joins the fixed ones, over every order): the shares add up to the job's gain, the slowest holds the most,
    and the evidence quotes the share."""
    d = diagnose(ranks)
    both = next(w for w in d.what_if if w.kind == "all_like_peers")
    assert len(d.slow_ranks) == 2
    assert sum(s.excess_us for s in d.slow_ranks) == pytest.approx(both.gain_us, abs=0.5)
    first, second = d.slow_ranks
    assert first.excess_us > second.excess_us > 0
    alone = {w.change: w.gain_us for w in d.what_if if w.kind == "like_peers"}
    assert first.excess_us > alone[f"rank {first.rank} ran like its peers"]  # more than fixing it alone saves
    for s in d.slow_ranks:
        assert any("its share of the replayed gain" in e.detail for e in s.evidence)


def test_a_gain_clears_its_noise_when_positive_and_enough_standard_errors_above_nothing() -> None:
    def w(gain: float, high: float) -> WhatIf:
        return WhatIf(kind="like_peers", change="rank 1 ran like its peers", step_us=100.0, gain_us=gain,
                      gain_low_us=2 * gain - high, gain_high_us=high)  # fmt: skip

    assert clears_noise(w(10.0, 20.0), 1.0)  # one standard error: 5
    assert not clears_noise(w(10.0, 40.0), 1.0)  # 15: the saving is within its noise
    assert not clears_noise(w(0.0, 0.0), 0.0) and not clears_noise(w(-3.0, 1.0), 0.0)


@pytest.mark.parametrize(
    ("ranks", "what"),
    [
        (synthetic_job(JobShape(), slow_rank=3, cause=Cause.HOST, extra_us=25_000.0), "rank"),
        (pipeline_job(PipeShape(pp=4, dp=4, rank_scale={13: 1.5})), "rank"),
        (pipeline_job(PipeShape(pp=4, dp=2, microbatches=8, stage_scale={3: 1.65})), "stage"),
    ],
    ids=["data-parallel", "pipeline", "stage"],
)
def test_one_noise_rule_for_every_layout(ranks: list[RankReport], what: str) -> None:
    """A slow rank of a data-parallel job or a pipeline, or a stage imbalance, is reported by one rule: its replayed
    gain clears its noise (DiagnosisConfig.gain_noise_z standard errors). Asked for more than the replay's steps can
    show, none of them is reported, and nothing else is named in their place (a bubble, not replayed, stays)."""
    d = diagnose(ranks)
    assert d.slow_ranks if what == "rank" else [f for f in d.findings if f.cause is Cause.STAGE_IMBALANCE]
    strict = diagnose(ranks, config=DiagnosisConfig(gain_noise_z=1e6))
    assert not strict.slow_ranks and Cause.STAGE_IMBALANCE not in {f.cause for f in strict.findings}
    assert not strict.verdict.startswith(("Rank", "Pipeline stage")), strict.verdict
