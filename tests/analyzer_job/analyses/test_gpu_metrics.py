"""GPU metrics of a rank from NVML samples: only the recorded window counts, the rank's own device is chosen,
plots are thinned, input is bounded, and a file the sidecar writes reads back."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from stepscope_analyzer.analyses.gpu_metrics import (
    GpuMetricsError,
    inflate,
    parse_samples,
    read_gpu_metrics,
    summarize_samples,
)
from stepscope_contract.gpu_metrics import GpuSample
from stepscope_contract.report import GPU_SERIES_POINTS
from stepscope_sidecar.nvml import write_records

pytestmark = pytest.mark.unit


def _line(t: float, gpu: int = 0, clock: float = 1410, **extra: Any) -> dict[str, Any]:
    return {"t": t, "gpu": gpu, "smClockMHz": clock, "powerW": 290.0, "temperatureC": 60, **extra}


def _samples(lines: list[dict[str, Any]]) -> list[GpuSample]:
    return [GpuSample.model_validate(x) for x in lines]


def test_only_samples_inside_the_window_count() -> None:
    idle = [_line(100 + i * 0.1, clock=210, throttleReasons=1) for i in range(10)]  # before the steps
    busy = [_line(101 + i * 0.1, clock=1400 + i, throttleReasons=0x40 if i < 5 else 0) for i in range(10)]
    m = summarize_samples(_samples(idle + busy), window=(101.0, 101.95))
    assert m is not None and m.samples == 10
    assert m.sm_clock_mhz is not None and m.sm_clock_mhz.min == 1400 and m.sm_clock_mhz.max == 1409
    assert [(t.reason, t.share) for t in m.throttle] == [("hw_thermal_slowdown", 0.5)]
    assert m.series.t_s[0] == 0.0 and m.window_s == pytest.approx(0.9)


def test_a_window_with_too_few_samples_uses_them_all() -> None:
    m = summarize_samples(_samples([_line(100.0), _line(100.1), _line(100.2)]), window=(500.0, 501.0))
    assert m is not None and m.samples == 3


def test_the_ranks_own_device_is_chosen() -> None:
    lines = [_line(1.0 + i, gpu=g, clock=1000 + g) for i in range(3) for g in range(4)]
    m = summarize_samples(_samples(lines), local_rank=2)
    assert m is not None and m.gpu == 2 and m.sm_clock_mhz is not None and m.sm_clock_mhz.mean == 1002
    other = summarize_samples(_samples(lines), local_rank=9)  # not sampled: the lowest device
    assert other is not None and other.gpu == 0
    assert summarize_samples([], local_rank=0) is None


def test_static_fields_and_missing_metrics() -> None:
    first = _line(1.0, name="NVIDIA H100", smClockMaxMHz=1980, powerLimitW=700.0, memory={"used": 5, "total": 80})
    later = {"t": 2.0, "gpu": 0, "memory": {"used": 7}}
    m = summarize_samples(_samples([first, later]))
    assert m is not None and (m.name, m.sm_clock_max_mhz, m.power_limit_w, m.memory_total_bytes) == (
        "NVIDIA H100", 1980, 700.0, 80,
    )  # fmt: skip
    assert m.memory_used_bytes is not None and m.memory_used_bytes.max == 7
    assert m.mem_clock_mhz is None and m.utilization_pct is None  # not reported: None, not 0
    assert m.series.sm_clock_mhz == [1410.0, None]


def test_long_captures_are_thinned_for_the_plots() -> None:
    lines = [_line(i * 0.01, clock=1000 + (i % 7)) for i in range(5000)]
    m = summarize_samples(_samples(lines))
    assert m is not None and m.samples == 5000
    assert len(m.series.t_s) <= GPU_SERIES_POINTS and len(m.series.sm_clock_mhz) == len(m.series.t_s)
    assert all(1000 <= (v or 0) <= 1006 for v in m.series.sm_clock_mhz)


def test_bad_lines_are_skipped_and_counted() -> None:
    text = b'{"t": 1, "smClockMHz": 1400}\nnot json\n{"t": -5}\n\n[1, 2]\n{"t": 2, "smClockMHz": 1410}\n'
    samples, skipped = parse_samples(text)
    assert [s.t for s in samples] == [1, 2] and skipped == 3
    capped, over = parse_samples(b'{"t": 1}\n' * 10, max_samples=4)
    assert len(capped) == 4 and over == 6


def test_input_is_bounded() -> None:
    bomb = gzip.compress(b" " * (5 << 20))
    with pytest.raises(GpuMetricsError, match="more than"):
        inflate(bomb, limit=1 << 20)
    with pytest.raises(GpuMetricsError, match="larger than"):
        inflate(b"x" * 100, limit=10)
    with pytest.raises(GpuMetricsError, match="corrupt gzip"):
        inflate(b"\x1f\x8b" + b"\x00" * 20)
    truncated = gzip.compress("".join(f'{{"t": {i}.{i * 7919 % 1000}}}\n' for i in range(5000)).encode())[:-50]
    samples, _ = parse_samples(inflate(truncated))  # what inflates is still read
    assert samples


def test_a_file_written_by_the_sidecar_reads_back(tmp_path: Path) -> None:
    records = [_line(10 + i * 0.1, gpu=g, clock=705 if g == 1 else 1410, throttleReasons=0x60 if g else 0)
               for i in range(20) for g in range(2)]  # fmt: skip
    path = tmp_path / "gpu_metrics.jsonl.gz"
    write_records(records, path, device=1)
    m, skipped = read_gpu_metrics(path.read_bytes(), window=(10.0, 12.0), local_rank=1)
    assert skipped == 0 and m is not None and m.gpu == 1 and m.samples == 20
    assert m.sm_clock_mhz is not None and m.sm_clock_mhz.mean == 705
    assert {t.reason for t in m.throttle} == {"sw_thermal_slowdown", "hw_thermal_slowdown"}
    plain, _ = read_gpu_metrics(json.dumps(records[0]).encode())  # not compressed: read as it is
    assert plain is not None and plain.samples == 1
