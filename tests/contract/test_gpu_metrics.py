"""The NVML sample format (gpu_metrics.jsonl.gz lines): camelCase keys, unknown keys ignored, bounds enforced;
throttle reason bits decode through the one table."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from stepscope_contract.gpu_metrics import THROTTLE_BY_KEY, THROTTLE_REASONS, GpuSample, throttle_reasons_of
from stepscope_contract.report import GpuMetrics, Report

pytestmark = pytest.mark.unit

LINE = {
    "t": 1716390922.1234,
    "gpu": 1,
    "name": "NVIDIA A100-SXM4-80GB",
    "utilization": {"gpu": 97, "memory": 41},
    "memory": {"used": 31138512896, "total": 85899345920},
    "powerW": 312.5,
    "powerLimitW": 400.0,
    "smClockMHz": 1980,
    "smClockMaxMHz": 1980,
    "memClockMHz": 1593,
    "temperatureC": 64,
    "throttleReasons": 0x40 | 0x20,
    "pcieTxKBs": 1200,
    "nvlink": {"txKiB": 0, "rxKiB": 0},
    "fromANewerSidecar": True,
}


def test_a_documented_line_parses_with_every_field() -> None:
    s = GpuSample.model_validate_json(json.dumps(LINE))
    assert (s.t, s.gpu, s.name) == (LINE["t"], 1, "NVIDIA A100-SXM4-80GB")
    assert s.utilization is not None and (s.utilization.gpu, s.utilization.memory) == (97, 41)
    assert s.memory is not None and s.memory.used == 31138512896
    assert (s.power_w, s.power_limit_w, s.sm_clock_mhz, s.sm_clock_max_mhz) == (312.5, 400.0, 1980, 1980)
    assert (s.mem_clock_mhz, s.temperature_c, s.throttle_reasons) == (1593, 64, 0x60)


def test_a_device_that_reports_little_still_gives_a_sample() -> None:
    s = GpuSample.model_validate({"t": 1.0})
    assert s.gpu == 0 and s.sm_clock_mhz is None and s.throttle_reasons is None


@pytest.mark.parametrize(
    "bad",
    [
        {"gpu": 0},  # no time
        {"t": -1},
        {"t": 1, "smClockMHz": -5},
        {"t": 1, "utilization": {"gpu": 250}},
        {"t": 1, "powerW": "lots"},
        {"t": 1, "throttleReasons": -1},
        {"t": 1, "name": "x" * 300},
    ],
)
def test_out_of_bounds_samples_are_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        GpuSample.model_validate(bad)


def test_non_finite_numbers_are_rejected() -> None:
    with pytest.raises(ValidationError):
        GpuSample.model_validate_json('{"t": 1, "powerW": Infinity}')


def test_throttle_bits_follow_nvml() -> None:
    assert [r.key for r in throttle_reasons_of(0x60)] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert throttle_reasons_of(0x1)[0].slowdown is False  # idle is not a slowdown
    assert {r.key for r in THROTTLE_REASONS if r.slowdown} == {
        "sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
    }  # fmt: skip
    assert throttle_reasons_of(1 << 20) == []  # unknown bits are left out
    assert THROTTLE_BY_KEY["hw_power_brake_slowdown"].bit == 0x80
    assert len({r.bit for r in THROTTLE_REASONS}) == len(THROTTLE_REASONS)


def test_report_schema_documents_gpu_metrics() -> None:
    schema = Report.model_json_schema(mode="serialization")
    rank = schema["$defs"]["RankReport"]["properties"]
    assert {"gpu_metrics", "environment", "trace_link", "phases", "step_phases"} <= set(rank)
    assert "gpu_metrics.jsonl.gz" in (GpuMetrics.__doc__ or "")
    assert "comparison" in schema["$defs"]["SlowRank"]["properties"]
    assert "capture" in schema["properties"]
