"""diff_reports on synthetic Reports: the verdict against the gate (noise passes, a real slowdown fails, a speed-up
is no regression, too few steps is unusable), one sample per job step, top changes with HTA TraceDiff's classes
and per-step figures, phases when both sides have them, the per-rank table and the notes."""

from __future__ import annotations

import pytest
from report_maker import noisy_job, rank, report

from stepscope_analyzer.diff import DiffConfig, diff_reports
from stepscope_contract.diff import ChangeKind, DiffResult, DiffVerdict
from stepscope_contract.report import Diagnosis, RankStatus, Report, StepPhases

pytestmark = pytest.mark.unit

GATE = DiffConfig(max_regression_pct=15.0)


def scaled(source: Report, factor: float) -> Report:
    return report([rank(r.rank, [d * factor for d in r.steps.durations_us]) for r in source.ranks])


@pytest.mark.parametrize("seed", range(20))
def test_two_runs_of_the_same_code_pass(seed: int) -> None:
    d = diff_reports(noisy_job(seed=seed, noise=0.10), noisy_job(seed=1000 + seed, noise=0.10), GATE)
    assert d.verdict is DiffVerdict.PASSED
    assert d.regression_pct is not None and abs(d.regression_pct) < 15
    assert d.regression_ci_low_pct is not None and d.regression_ci_high_pct is not None
    assert d.regression_ci_low_pct <= d.regression_pct <= d.regression_ci_high_pct
    assert d.reason.startswith("steps are") and "not shown to exceed 15%" in d.reason


@pytest.mark.parametrize("seed", range(10))
def test_a_real_slowdown_fails(seed: int) -> None:
    d = diff_reports(noisy_job(seed=seed, noise=0.05), scaled(noisy_job(seed=1000 + seed, noise=0.05), 1.25), GATE)
    assert d.verdict is DiffVerdict.REGRESSED
    assert d.regression_ci_low_pct is not None and d.regression_ci_low_pct > 15
    assert 15 < (d.regression_pct or 0) < 35
    assert "more than the 15% allowed" in d.reason


def test_a_ten_percent_drift_passes_and_a_slowdown_within_the_noise_is_not_called() -> None:
    base = noisy_job(seed=1, noise=0.10)
    drift = diff_reports(base, scaled(noisy_job(seed=2, noise=0.10), 1.10), GATE)
    assert drift.verdict is DiffVerdict.PASSED
    # very noisy steps: even +25% is not shown beyond 15% with confidence, so the gate does not fail on it
    wild = diff_reports(noisy_job(seed=1, noise=0.6, n_steps=5), scaled(noisy_job(seed=2, noise=0.6, n_steps=5), 1.25))
    assert wild.verdict is DiffVerdict.PASSED
    assert (wild.regression_ci_high_pct or 0) - (wild.regression_ci_low_pct or 0) > 50


def test_an_improvement_is_not_a_regression() -> None:
    d = diff_reports(noisy_job(seed=3, noise=0.05), scaled(noisy_job(seed=4, noise=0.05), 0.7), GATE)
    assert d.verdict is DiffVerdict.IMPROVED
    assert d.regression_pct is not None and d.regression_pct < -15
    assert "faster" in d.reason


def test_one_sample_per_job_step_not_per_rank() -> None:
    d = diff_reports(noisy_job(world=8, n_steps=12), noisy_job(world=8, n_steps=12, seed=5), GATE)
    assert (d.baseline.steps, d.candidate.steps) == (12, 12)
    assert (d.baseline.ranks_analysed, d.candidate.ranks) == (8, 8)
    # ranks with fewer steps stop contributing after their last one
    short = report([rank(0, [1000.0] * 6), rank(1, [1000.0] * 4)])
    assert diff_reports(short, short, GATE).baseline.steps == 6


def test_too_few_steps_is_unusable() -> None:
    two = report([rank(0, [1000.0, 1100.0])])
    d = diff_reports(two, noisy_job(), GATE)
    assert d.verdict is DiffVerdict.UNUSABLE
    assert "baseline 2" in d.reason and "record more steps" in d.reason
    three = report([rank(0, [1000.0, 1100.0, 1050.0])])
    strict = diff_reports(three, three, DiffConfig(max_regression_pct=15, confidence=0.95))
    assert strict.verdict is DiffVerdict.UNUSABLE
    assert "too few for a 95% interval" in strict.reason
    assert strict.regression_pct == pytest.approx(0.0)
    assert strict.regression_ci_low_pct is None


def test_a_side_without_analysed_ranks_is_unusable() -> None:
    broken = report([rank(0, []).model_copy(update={"status": RankStatus.ERROR, "error": "truncated"})])
    d = diff_reports(noisy_job(), broken, GATE)
    assert d.verdict is DiffVerdict.UNUSABLE
    assert d.regression_pct is None
    assert d.candidate.ranks_analysed == 0 and d.candidate.ranks == 1


def test_top_changes_follow_trace_diff_semantics() -> None:
    steps = [10_000.0] * 10
    base = report(
        [
            rank(0, steps, functions={"aten::mm": (20_000.0, 20), "old_op": (5_000.0, 10)}),
            rank(1, steps, functions={"aten::mm": (20_000.0, 20), "old_op": (5_000.0, 10)}),
        ]
    )
    cand = report(
        [
            rank(0, [15_000.0] * 10, functions={"aten::mm": (40_000.0, 40), "added_work": (50_000.0, 10)}),
            rank(1, [15_000.0] * 10, functions={"aten::mm": (40_000.0, 40)}),  # added work on rank 0 only
        ]
    )
    d = diff_reports(base, cand, GATE)
    assert d.verdict is DiffVerdict.REGRESSED
    rows = {c.name: c for c in d.top_changes}
    assert [c.name for c in d.top_changes] == ["added_work", "aten::mm", "old_op"]  # largest increase first
    added, mm, old = rows["added_work"], rows["aten::mm"], rows["old_op"]
    assert added.change is ChangeKind.ADDED and added.kind == "cpu_op"
    # on rank 0 only: kept on that rank, 50 ms over its 10 steps (not 2.5 ms averaged over both ranks)
    assert added.rank == 0 and (added.baseline_us_per_step, added.candidate_us_per_step) == (0.0, 5000.0)
    assert added.count_delta == pytest.approx(1.0)
    assert mm.rank is None  # the same on both ranks: job-wide
    assert mm.change is ChangeKind.CHANGED
    assert (mm.baseline_us_per_step, mm.candidate_us_per_step, mm.delta_us_per_step) == (2000.0, 4000.0, 2000.0)
    assert (mm.baseline_count_per_step, mm.candidate_count_per_step, mm.count_delta) == (2.0, 4.0, 2.0)
    assert old.change is ChangeKind.REMOVED and old.delta_us_per_step == -500.0 and old.count_delta == -1.0
    assert d.changes_total == 3
    assert "top change: added_work +5.00 ms/step (added on rank 0)" in d.reason


def test_unchanged_names_are_left_out_and_the_list_is_cut() -> None:
    steps = [1000.0] * 5
    names = {f"op{i}": (100.0 * (i + 1), 5) for i in range(30)}
    more = {n: (t * 2, c) for n, (t, c) in names.items()}
    same = {"steady": (500.0, 5)}
    d = diff_reports(
        report([rank(0, steps, functions={**names, **same})]),
        report([rank(0, steps, functions={**more, **same})]),
        DiffConfig(max_regression_pct=15, top_changes=10, wall_clock=True),  # every op slower alike: not speed here
    )
    assert d.changes_total == 30
    assert len(d.top_changes) == 10
    assert d.top_changes[0].name == "op29"
    assert "steady" not in {c.name for c in d.top_changes}


def test_kernels_below_the_functions_cut_are_compared() -> None:
    steps = [1000.0] * 5
    d = diff_reports(
        report([rank(0, steps, kernels={"gemm": (1000.0, 5)})]),
        report([rank(0, steps, kernels={"gemm": (3000.0, 5), "new_kernel": (500.0, 5)})]),
        GATE,
    )
    rows = {c.name: c for c in d.top_changes}
    assert rows["gemm"].kind == "kernel" and rows["gemm"].delta_us_per_step == 400.0
    assert rows["new_kernel"].change is ChangeKind.ADDED


def test_phases_job_wide_and_per_rank() -> None:
    p1 = StepPhases(forward=4000, backward=5000, optimizer=1000)
    p2 = StepPhases(forward=4000, backward=8000, optimizer=1000, communication_wait=500)
    base = report([rank(r, [10_000.0] * 5, phases=p1) for r in range(2)])
    cand = report([rank(0, [13_500.0] * 5, phases=p2), rank(1, [13_500.0] * 5, phases=p2)])
    d = diff_reports(base, cand, GATE)
    job = {p.phase: p for p in d.phases}
    assert set(job) == set(StepPhases.model_fields)
    assert job["backward"].delta_us == 3000.0 and job["forward"].delta_us == 0.0
    assert job["communication_wait"].candidate_us == 500.0
    assert {p.phase: p.delta_us for p in d.ranks[1].phases}["backward"] == 3000.0
    assert not any("phases" in n for n in d.notes)


def test_without_phases_on_a_side_phases_are_not_compared() -> None:
    cand = report([rank(0, [1000.0] * 5, phases=StepPhases(forward=500, other=500))])
    d = diff_reports(report([rank(0, [1000.0] * 5)]), cand, GATE)
    assert d.phases == []
    assert d.ranks[0].phases == []
    assert "no step phases in the baseline report: phases are not compared" in d.notes


def test_rank_table_and_notes() -> None:
    base = report([rank(r, [1000.0] * 5) for r in range(3)])
    cand = report([rank(0, [1100.0] * 5), rank(1, [1000.0] * 5)], world_size=2)
    d = diff_reports(base, cand, GATE)
    assert [(r.rank, r.baseline_status, r.candidate_status) for r in d.ranks] == [
        (0, "ok", "ok"),
        (1, "ok", "ok"),
        (2, "ok", "absent"),
    ]
    assert d.ranks[0].delta_pct == pytest.approx(10.0)
    assert d.ranks[2].delta_pct is None and d.ranks[2].candidate_median_us is None
    assert any(n.startswith("world sizes differ (baseline 3, candidate 2)") for n in d.notes)


def test_the_reports_own_step_numbers_are_shown() -> None:
    base = noisy_job()
    base.diagnosis = Diagnosis(verdict="x", median_step_us=12_345.0, p90_step_us=23_456.0)
    d = diff_reports(base, noisy_job(seed=9), GATE, baseline_source="runs/main", candidate_source="runs/pr")
    assert (d.baseline.median_step_us, d.baseline.p90_step_us) == (12_345.0, 23_456.0)
    assert 15_000 < d.candidate.median_step_us < 25_000  # computed the same way when the report has none
    assert (d.baseline.source, d.candidate.source) == ("runs/main", "runs/pr")


def test_the_result_round_trips_through_json() -> None:
    d = diff_reports(noisy_job(), scaled(noisy_job(seed=2), 1.5), GATE)
    again = DiffResult.model_validate_json(d.model_dump_json())
    assert again == d
    data = d.model_dump(mode="json")
    for key in ("regression_pct", "regression_ci_low_pct", "regression_ci_high_pct", "verdict", "top_changes"):
        assert key in data


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="confidence"):
        DiffConfig(confidence=1.5)
    with pytest.raises(ValueError, match="max_regression_pct"):
        DiffConfig(max_regression_pct=-1)


def test_absurd_numbers_in_a_report_are_left_out() -> None:
    """A broken or hostile report.json: non-finite or absurd durations are not steps; the result stays valid JSON."""
    from stepscope_analyzer.report import model_json_bytes

    good = [10_000.0] * 6
    bad = report([rank(0, [*good, float("nan"), float("inf"), -5.0, 0.0, 1e300, 1e-300])])
    bad.diagnosis = Diagnosis(verdict="x", median_step_us=float("inf"), p90_step_us=float("nan"))
    d = diff_reports(bad, report([rank(0, [12_000.0] * 6)]), GATE)
    assert d.baseline.steps == 6
    assert d.baseline.median_step_us == 10_000.0
    assert d.regression_pct == pytest.approx(20.0)
    DiffResult.model_validate_json(model_json_bytes(d))


def test_absurd_per_rank_figures_are_left_out() -> None:
    from stepscope_analyzer.report import model_json_bytes

    inf = float("inf")
    r = rank(0, [10_000.0] * 6, functions={"op": (inf, 3), "fine": (600.0, 6)}, phases=StepPhases(forward=inf))
    r.steps.median_us = inf
    d = diff_reports(report([r]), report([rank(0, [10_000.0] * 6, phases=StepPhases(forward=1.0))]), GATE)
    assert d.ranks[0].baseline_median_us is None and d.ranks[0].delta_pct is None
    assert d.phases == []
    assert {c.name: c.change for c in d.top_changes} == {"fine": ChangeKind.REMOVED}
    DiffResult.model_validate_json(model_json_bytes(d))


def test_swapping_the_sides_of_a_regression_gives_an_improvement() -> None:
    """The mirror image: a candidate 55% slower than its baseline regressed at 40%; its baseline, seen from the other
    side, is 35% faster, which is an improvement at 40% too (the baseline slower by more than 40%)."""
    gate = DiffConfig(max_regression_pct=40.0)
    base, slow = noisy_job(seed=5, noise=0.03), scaled(noisy_job(seed=6, noise=0.03), 1.55)
    forward, backward = diff_reports(base, slow, gate), diff_reports(slow, base, gate)
    assert forward.verdict is DiffVerdict.REGRESSED
    assert backward.verdict is DiffVerdict.IMPROVED
    assert backward.regression_pct is not None and -40 < backward.regression_pct < -30
