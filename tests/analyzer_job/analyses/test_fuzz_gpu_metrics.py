"""Property tests (hypothesis) of the GPU metrics reader over bent sample lines and raw bytes: any file gives
(metrics or None, skipped lines) or a GpuMetricsError, never another exception; what it gives holds no NaN or
Infinity (it reaches report.json); every line is either a sample or counted as skipped."""

from __future__ import annotations

import contextlib
import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope_analyzer.analyses.gpu_metrics import GpuMetricsError, read_gpu_metrics
from stepscope_contract.finite import non_finite_paths
from stepscope_testing.hostile_inputs import gpu_line

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]
QUICK = settings(max_examples=max(20, settings.default.max_examples // 3))


def _file(lines: list[dict[str, object]], packed: bool, garbage: bytes) -> bytes:
    text = b"\n".join(json.dumps(line).encode() for line in lines) + b"\n" + garbage
    return gzip.compress(text) if packed else text


@QUICK
@given(
    st.lists(gpu_line(), max_size=8),
    st.booleans(),
    st.binary(max_size=40),
    st.tuples(st.floats(0, 1e10), st.floats(0, 1e10)) | st.none(),
    st.integers(-1, 8) | st.none(),
)
def test_any_metrics_file_gives_finite_metrics_or_its_error(
    lines: list[dict[str, object]],
    packed: bool,
    garbage: bytes,
    window: tuple[float, float] | None,
    local_rank: int | None,
) -> None:
    data = _file(lines, packed, garbage)
    try:
        metrics, skipped = read_gpu_metrics(data, window=window, local_rank=local_rank)
    except GpuMetricsError:
        return
    assert skipped >= 0
    if metrics is not None:
        assert non_finite_paths(metrics.model_dump()) == []


@given(st.binary(max_size=600))
def test_any_bytes_give_metrics_or_its_error(data: bytes) -> None:
    with contextlib.suppress(GpuMetricsError):
        read_gpu_metrics(data)
