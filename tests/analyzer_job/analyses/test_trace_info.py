"""What a trace says about where it ran: backend, NCCL, devices, host, and the steps' wall-clock window."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from stepscope_analyzer.analyses.summary import summarize_trace
from stepscope_analyzer.analyses.trace_info import cuda_version, device_names

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_real_nccl_trace() -> None:
    env = summarize_trace(FIXTURES / "hta" / "nccl_2rank_rank0.json.gz").environment
    assert env is not None
    assert (env.backend, env.nccl_version, env.device_name) == ("nccl", "2.17.1", "NVIDIA A100-PG509-200")
    # the trace's own log says 'INFO:2024-05-22 17:15:22' (US Pacific, UTC-7) when tracing began
    assert env.window_start is not None and env.window_end is not None
    assert env.window_start.replace(microsecond=0) == datetime(2024, 5, 23, 0, 15, 22, tzinfo=UTC)
    assert 0.6 < (env.window_end - env.window_start).total_seconds() < 0.7  # 3 steps of ~222 ms


def test_a_cpu_gloo_trace() -> None:
    env = summarize_trace(FIXTURES / "gloo_2rank_rank0.pt.trace.json.gz").environment
    assert env is not None and env.backend == "gloo" and env.nccl_version is None and env.device_name is None
    assert env.hostname == "vm" and env.window_start is not None


def test_kineto_cuda_versions_and_device_lists() -> None:
    assert cuda_version("12040") == "12.4" and cuda_version(11080) == "11.8" and cuda_version("12.1") == "12.1"
    assert cuda_version(None) is None and cuda_version({"x": 1}) is None
    props = [{"name": "NVIDIA H100"}, {"name": "NVIDIA H100"}, {"name": "NVIDIA A100"}, "junk"]
    assert device_names({"deviceProperties": props}) == "NVIDIA H100, NVIDIA A100"
    assert device_names({"deviceProperties": []}) is None and device_names({}) is None
