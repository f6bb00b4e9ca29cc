"""The gate on real GPU recordings (fixtures/gpu_jobs: one H200, DDP over gloo, see its README): a second run of the
same training passes, a run where one of two ranks trains on batches twice as large fails on its measured steps
(+39%) although every kernel it shares with the baseline ran ~28% slower per call (on CPU ranks that would read as
the machine's speed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_analyzer.diff import DiffConfig, diff_reports, load_side
from stepscope_contract.diff import DiffVerdict

pytestmark = pytest.mark.unit

JOBS = Path(__file__).parent.parent / "fixtures" / "gpu_jobs"
GATE = DiffConfig(max_regression_pct=15.0)


def test_the_same_training_passes() -> None:
    d = diff_reports(load_side(str(JOBS / "gpu-2r-balanced")), load_side(str(JOBS / "gpu-2r-profiler")), GATE)
    assert d.verdict is DiffVerdict.PASSED, d.reason
    assert d.regression_pct is not None and abs(d.regression_pct) < 5.0


def test_a_rank_with_twice_the_batch_fails_on_its_measured_steps() -> None:
    d = diff_reports(load_side(str(JOBS / "gpu-2r-balanced")), load_side(str(JOBS / "gpu-2r-compute")), GATE)
    assert d.verdict is DiffVerdict.REGRESSED and not d.at_equal_op_speed, d.reason
    assert d.regression_pct is not None and d.regression_pct > 30.0
    assert d.unchanged_ops_speed_pct is not None and d.unchanged_ops_speed_pct > 15.0
    assert any("kernels with the same calls" in n and "measured steps decide" in n for n in d.notes), d.notes
