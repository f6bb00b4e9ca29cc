"""distinct and median answer as numpy.unique and numpy.median do, and a rank's analysis, on traces of every kind the
fixtures hold, never imports numpy.ma (which those two numpy functions import on first use)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stepscope_analyzer.analyses.sorted_values import distinct, median

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

integers = hnp.arrays(np.int64, st.integers(0, 200), elements=st.integers(-(2**40), 2**40))
floats = hnp.arrays(np.float64, st.integers(0, 200), elements=st.floats(-1e12, 1e12, allow_nan=False))


@given(integers)
def test_distinct_integers_are_numpy_s_unique(values: np.ndarray) -> None:
    assert np.array_equal(distinct(values), np.unique(values))
    assert distinct(values).dtype == values.dtype


@given(floats)
def test_distinct_floats_are_numpy_s_unique(values: np.ndarray) -> None:
    assert np.array_equal(distinct(values), np.unique(values))


@given(floats)
def test_the_median_is_numpy_s(values: np.ndarray) -> None:
    if values.size == 0:
        assert math.isnan(median(values))
        return
    assert median(values) == float(np.median(values))


def test_a_nan_makes_the_median_nan_as_in_numpy() -> None:
    values = np.array([1.0, float("nan"), 3.0])
    assert math.isnan(median(values)) and math.isnan(float(np.median(values)))


def test_a_two_dimensional_input_is_read_flat() -> None:
    grid = np.array([[3, 1], [2, 3]])
    assert distinct(grid).tolist() == [1, 2, 3]
    assert median(grid) == 2.5


def _one_trace(folder: Path) -> Path:
    return sorted(p for p in folder.rglob("*.json.gz"))[0]


@pytest.mark.integration
def test_a_rank_s_analysis_never_imports_numpy_ma() -> None:
    """GPU (NCCL, HTA's test data and recorded jobs), gloo CPU, pipeline and FSDP traces, on one CPU and on two:
    numpy.ma (12 ms) would otherwise be imported by the first rank each worker analyses."""
    traces = [
        FIXTURES / "hta" / "nccl_2rank_rank0.json.gz",
        _one_trace(FIXTURES / "gpu_jobs" / "gpu-4r-python"),
        FIXTURES / "gloo_2rank_rank0.pt.trace.json.gz",
        _one_trace(FIXTURES / "pipeline_jobs" / "cpu-pp2dp2-slow-worker"),
        _one_trace(FIXTURES / "fsdp_jobs" / "cpu-fsdp2-4r-slow-host-40ms"),
        _one_trace(FIXTURES / "cpu_jobs" / "cpu-balanced-4r-hook-0"),
    ]
    code = f"""
        import sys
        from stepscope_analyzer.ranks.trace_work import compute
        for path in {[str(t) for t in traces]!r}:
            data = open(path, "rb").read()
            for cpus in (1, 2):
                done = compute(data, None, None, 50, cpus)
                assert done.summary is not None and done.summary.steps.count > 0, (path, done.error)
        print("numpy.ma" in sys.modules, "numpy" in sys.modules)
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False True"
