from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

from stepscope_sidecar.nvml import Sampler, probe, write_records

pytestmark = pytest.mark.unit


def test_without_a_gpu_the_sampler_says_why_and_carries_on() -> None:
    reason = probe()
    if reason == "available":
        pytest.skip("this host has a GPU")
    assert reason.startswith("unavailable: ")
    s = Sampler(0.05)
    s.start()
    time.sleep(0.1)
    s.stop()
    assert s.status == reason and s.records == []


def test_sampling_rate_is_at_least_10_hz() -> None:
    assert Sampler(1.0).interval_s == 0.1 and Sampler(0.02).interval_s == 0.02


def test_records_per_device(tmp_path: Path) -> None:
    recs = [{"t": 1.0, "gpu": 0, "powerW": 1.0}, {"t": 1.0, "gpu": 1, "powerW": 2.0}]
    assert write_records(recs, tmp_path / "a.jsonl.gz", 1) == 1
    lines = gzip.decompress((tmp_path / "a.jsonl.gz").read_bytes()).decode().splitlines()
    assert [json.loads(x) for x in lines] == [recs[1]]
    assert write_records(recs, tmp_path / "b.jsonl.gz", None) == 2
    assert write_records(recs, tmp_path / "c.jsonl.gz", 5) == 2  # that device is not visible: keep them all
