"""The unchanged ops' per-call speed: every op slower alike (a slower machine) reads as that factor, added work or
one slower op (even the largest) does not move it, its interval widens with the ops' disagreement, too few unchanged
ops give none; the gate compares steps at equal op speed with it, or on the measured steps with wall_clock."""

from __future__ import annotations

import pytest
from report_maker import noisy_job, rank, report

from stepscope_analyzer.diff import DiffConfig, diff_reports
from stepscope_analyzer.diff.name_deltas import name_times
from stepscope_analyzer.diff.op_speed import unchanged_op_speed
from stepscope_contract.diff import DiffVerdict
from stepscope_contract.report import Report, StepPhases

pytestmark = pytest.mark.unit

OPS = {f"aten::op{i}": (1000.0 * (i + 1), 10 * (i + 1)) for i in range(8)}  # name -> (µs over 10 steps, calls)


def job(ops: dict[str, tuple[float, int]], step_us: float = 50_000.0) -> Report:
    return report([rank(r, [step_us] * 10, functions=ops) for r in range(2)])


def speed(base: dict[str, tuple[float, int]], cand: dict[str, tuple[float, int]]) -> float | None:
    found = unchanged_op_speed(name_times(job(base)), name_times(job(cand)))
    return None if found is None else found.pct


def test_every_op_slower_alike_reads_as_that_factor() -> None:
    assert speed(OPS, {n: (t * 1.2, c) for n, (t, c) in OPS.items()}) == pytest.approx(20.0)
    assert speed(OPS, OPS) == pytest.approx(0.0)


def test_added_work_and_one_slower_op_leave_it_alone() -> None:
    more = dict(OPS) | {"aten::op7": (OPS["aten::op7"][0] * 2, OPS["aten::op7"][1] * 2)}  # twice the calls
    more["added_work"] = (30_000.0, 90)
    more["aten::op6"] = (OPS["aten::op6"][0] * 3, OPS["aten::op6"][1])  # one op got slower
    assert speed(OPS, more) == pytest.approx(0.0)


def test_one_op_holding_most_of_the_time_does_not_decide_it() -> None:
    big = OPS | {"aten::addmm": (200_000.0, 100)}  # 85% of the op time
    found = unchanged_op_speed(name_times(job(big)), name_times(job(big | {"aten::addmm": (400_000.0, 100)})))
    assert found is not None and found.pct == pytest.approx(0.0)  # its 2x is the code's, not the machine's
    assert found.ops == len(big) and found.share == pytest.approx(1.0)


def test_the_interval_holds_the_estimate_and_widens_when_the_ops_disagree() -> None:
    alike = unchanged_op_speed(name_times(job(OPS)), name_times(job({n: (t * 1.2, c) for n, (t, c) in OPS.items()})))
    assert alike is not None and alike.low_pct == pytest.approx(20.0) and alike.high_pct == pytest.approx(20.0)
    spread = {n: (t * (1.0 + 0.05 * i), c) for i, (n, (t, c)) in enumerate(OPS.items())}  # 0% .. +35%
    found = unchanged_op_speed(name_times(job(OPS)), name_times(job(spread)))
    assert found is not None and found.low_pct < found.pct < found.high_pct
    assert found.low_pct >= 0.0 and found.high_pct <= 35.0 + 1e-9
    wider = unchanged_op_speed(name_times(job(OPS)), name_times(job(spread)), confidence=0.99)
    assert wider is not None and wider.high_pct - wider.low_pct >= found.high_pct - found.low_pct


def test_too_few_unchanged_ops_say_nothing() -> None:
    assert speed(OPS, {n: (t, c * 2) for n, (t, c) in OPS.items()}) is None  # every op called twice as often
    assert speed(dict(list(OPS.items())[:3]), dict(list(OPS.items())[:3])) is None  # three ops


def test_collectives_and_step_spans_are_not_work() -> None:
    base = OPS | {"gloo:all_reduce": (90_000.0, 10), "ProfilerStep#3": (500_000.0, 1)}
    cand = OPS | {"gloo:all_reduce": (300_000.0, 10), "ProfilerStep#3": (900_000.0, 1)}
    assert speed(base, cand) == pytest.approx(0.0)


def test_the_same_code_on_a_slower_machine_passes_at_equal_op_speed_and_fails_on_wall_clock() -> None:
    slower = {n: (t * 1.3, c) for n, (t, c) in OPS.items()}  # every op 30% slower per call, steps too
    d = diff_reports(job(OPS), job(slower, 65_000.0), DiffConfig(max_regression_pct=15.0))
    assert d.verdict is DiffVerdict.PASSED and d.at_equal_op_speed
    assert d.regression_pct == pytest.approx(0.0, abs=1e-6) and d.step_regression_pct == pytest.approx(30.0)
    assert d.unchanged_ops_speed_pct == pytest.approx(30.0) and d.unchanged_ops == len(OPS)
    assert "at equal op speed" in d.reason and "equal op speed" in d.method
    assert any("ran 30.0% slower per call" in n and "--wall-clock" in n for n in d.notes), d.notes
    wall = diff_reports(job(OPS), job(slower, 65_000.0), DiffConfig(max_regression_pct=15.0, wall_clock=True))
    assert wall.verdict is DiffVerdict.REGRESSED and not wall.at_equal_op_speed
    assert wall.regression_pct == pytest.approx(30.0) and "at equal op speed" not in wall.reason
    assert any("machine's speed differed" in n for n in wall.notes), wall.notes


def waiting_job(op_speed: float, wait_us: float = 40_000.0) -> Report:
    """Steps that mostly wait for their input: 10 ms of work at the baseline's speed, run `op_speed` times as long per
    call, and `wait_us` in data loading that no machine speed moves (the ranks' phases say which is which)."""
    ops_us = 10_000.0 * op_speed
    ops = {n: (t * op_speed, c) for n, (t, c) in OPS.items()}
    phases = StepPhases(data_loading=wait_us, forward=0.4 * ops_us, backward=0.5 * ops_us, other=0.1 * ops_us)
    steps = [(ops_us + wait_us) * (1 + 0.01 * (k % 5)) for k in range(10)]
    return report([rank(r, steps, functions=ops, phases=phases) for r in range(2)])


@pytest.mark.parametrize("op_speed", [0.5, 2.0])
def test_only_the_steps_op_time_follows_the_machines_speed(op_speed: float) -> None:
    # the same code, its ops twice as fast (or slow) per call: the steps move by the work's share only (-10% / +20%)
    d = diff_reports(waiting_job(1.0), waiting_job(op_speed), DiffConfig(max_regression_pct=15.0))
    assert d.at_equal_op_speed and d.unchanged_ops_speed_pct == pytest.approx(100 * (op_speed - 1))
    assert d.step_regression_pct == pytest.approx(-10.0 if op_speed < 1 else 20.0)
    assert d.regression_pct == pytest.approx(0.0, abs=1e-6) and d.verdict is DiffVerdict.PASSED, d.reason


def test_added_work_in_a_waiting_step_is_caught_at_equal_op_speed() -> None:
    # 20 ms of work added to a 50 ms step whose 40 ms are waiting, the candidate's ops 20% faster per call
    base = waiting_job(1.0)
    faster = waiting_job(0.8, wait_us=40_000.0 + 20_000.0)  # the added work, not an op the two sides share
    d = diff_reports(base, faster, DiffConfig(max_regression_pct=15.0))
    assert d.step_regression_pct == pytest.approx(36.0)  # 68 ms against 50
    assert d.regression_pct == pytest.approx(40.0) and d.verdict is DiffVerdict.REGRESSED, d.reason


def test_added_work_on_a_faster_machine_is_caught_at_equal_op_speed() -> None:
    # the candidate's machine ran every op 15% faster; its added work makes the step 30% longer at that speed
    faster = {n: (t * 0.85, c) for n, (t, c) in OPS.items()} | {"added_work": (5_000.0 * 10, 10)}
    d = diff_reports(job(OPS), job(faster, 50_000.0 * 0.85 * 1.3), DiffConfig(max_regression_pct=15.0))
    assert d.step_regression_pct == pytest.approx(10.5)  # measured: within the gate
    assert d.verdict is DiffVerdict.REGRESSED and d.regression_pct == pytest.approx(30.0)
    assert d.top_changes[0].name == "added_work"
    low, high, est = d.regression_ci_low_pct, d.regression_ci_high_pct, d.regression_pct
    assert low is not None and high is not None and est is not None and low <= est <= high
    wall = diff_reports(
        job(OPS), job(faster, 50_000.0 * 0.85 * 1.3), DiffConfig(max_regression_pct=15.0, wall_clock=True)
    )
    assert wall.verdict is DiffVerdict.PASSED


def test_the_speed_figures_uncertainty_widens_the_gates_interval() -> None:
    spread = {n: (t * (1.0 + 0.05 * i), c) for i, (n, (t, c)) in enumerate(OPS.items())}
    steps = [50_000.0 * (1 + 0.01 * (k % 5)) for k in range(10)]
    base = report([rank(r, steps, functions=OPS) for r in range(2)])
    cand = report([rank(r, [s * 1.15 for s in steps], functions=spread) for r in range(2)])
    d = diff_reports(base, cand, DiffConfig())
    wall = diff_reports(base, cand, DiffConfig(wall_clock=True))
    assert d.at_equal_op_speed and d.unchanged_ops_speed_ci_low_pct is not None
    assert (
        d.unchanged_ops_speed_ci_low_pct < (d.unchanged_ops_speed_pct or 0) < (d.unchanged_ops_speed_ci_high_pct or 0)
    )
    width = (d.regression_ci_high_pct or 0) - (d.regression_ci_low_pct or 0)
    assert width > (wall.regression_ci_high_pct or 0) - (wall.regression_ci_low_pct or 0)


def test_without_enough_unchanged_ops_the_measured_steps_decide() -> None:
    d = diff_reports(noisy_job(seed=1), noisy_job(seed=2))
    assert d.unchanged_ops_speed_pct is None and not d.at_equal_op_speed  # no ops listed
    assert d.regression_pct == d.step_regression_pct and "at equal op speed" not in d.reason
    same = diff_reports(job(OPS), job(OPS), DiffConfig())
    assert same.unchanged_ops_speed_pct == pytest.approx(0.0) and not any("per call" in n for n in same.notes)


def test_the_machines_speed_is_taken_out_and_only_the_decided_interval_counts() -> None:
    steps = [50_000.0 * (1 + 0.01 * (k % 5)) for k in range(10)]
    base = report([rank(r, steps, functions=OPS) for r in range(2)])
    # the ops disagree (0% .. +70% per call, their weighted median +15%): the speed figure is uncertain, and the
    # steps at equal op speed (+21.7%) are not shown beyond the gate although the measured +40% would be
    ratios = [1.7, 1.6, 1.5, 1.0, 1.05, 1.1, 1.15, 1.2]
    spread = {n: (t * f, c) for f, (n, (t, c)) in zip(ratios, OPS.items(), strict=True)}
    gate = DiffConfig(max_regression_pct=15.0)
    d = diff_reports(base, report([rank(r, [s * 1.4 for s in steps], functions=spread) for r in range(2)]), gate)
    assert d.unchanged_ops_speed_pct == pytest.approx(15.0)
    assert d.step_regression_ci_low_pct is not None and d.step_regression_ci_low_pct > 15.0
    assert d.regression_ci_low_pct is not None and d.regression_ci_low_pct < 15.0
    assert d.verdict is DiffVerdict.PASSED and d.regression_pct == pytest.approx(100 * (1.4 / 1.15 - 1))
    assert "measured steps are 40.0% slower than the baseline" in d.reason
    assert "at equal op speed (the machine's speed taken out) +21.7%" in d.reason
    # every op 35% slower: the machine explains the measured +40%
    alike = {n: (t * 1.35, c) for n, (t, c) in OPS.items()}
    ok = diff_reports(base, report([rank(r, [s * 1.4 for s in steps], functions=alike) for r in range(2)]), gate)
    assert ok.verdict is DiffVerdict.PASSED and ok.step_regression_pct == pytest.approx(40.0)
    assert "measured steps are 40.0% slower" in ok.reason


def test_on_gpu_ranks_the_kernels_give_the_speed() -> None:
    kernels = {f"gemm_{i}": (2000.0 * (i + 1), 10 * (i + 1)) for i in range(6)}

    def gpu_job(ops_factor: float, kernel_factor: float) -> Report:
        ops = {n: (t * ops_factor, c) for n, (t, c) in OPS.items()}
        ks = {n: (t * kernel_factor, c) for n, (t, c) in kernels.items()}
        return report([rank(r, [50_000.0] * 10, functions=ops, kernels=ks) for r in range(2)])

    # the host ops took 30% longer (they wait for the device, or the host is busier), the kernels ran as before
    found = unchanged_op_speed(name_times(gpu_job(1.0, 1.0)), name_times(gpu_job(1.3, 1.0)))
    assert found is not None and found.pct == pytest.approx(0.0) and found.ops == len(kernels)
    slower = unchanged_op_speed(name_times(gpu_job(1.0, 1.0)), name_times(gpu_job(1.0, 1.2)))
    assert slower is not None and slower.pct == pytest.approx(20.0)
    assert slower.kernels and found.kernels  # measured on kernels


def test_on_gpu_ranks_the_measured_steps_decide() -> None:
    """Every kernel 30% slower per call with the same calls (a library's kernels, a larger shard): a regression of
    the code, not a slower machine; the kernels' figure is reported."""
    kernels = {f"gemm_{i}": (2000.0 * (i + 1), 10 * (i + 1)) for i in range(6)}
    base = report([rank(r, [50_000.0] * 10, functions=OPS, kernels=kernels) for r in range(2)])
    slower = {n: (t * 1.3, c) for n, (t, c) in kernels.items()}
    cand = report([rank(r, [65_000.0] * 10, functions=OPS, kernels=slower) for r in range(2)])
    d = diff_reports(base, cand, DiffConfig(max_regression_pct=15.0))
    assert d.verdict is DiffVerdict.REGRESSED and not d.at_equal_op_speed
    assert d.regression_pct == pytest.approx(30.0) and d.unchanged_ops_speed_pct == pytest.approx(30.0)
    assert any("6 kernels" in n and "measured steps decide" in n for n in d.notes), d.notes
