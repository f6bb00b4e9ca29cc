from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from stepscope_contract.gpu_metrics import GpuSample
from stepscope_sidecar.nvml import STATIC_TICKS, Sampler, probe, write_records

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


class NotSupported(Exception):
    """What NVML raises for a query the device does not answer."""


class FakeNvml:
    """A stand-in for the pynvml module: two A100s, device 1 held down by thermal slowdown. It counts the calls,
    so a test can check that a query the device refuses is not asked again."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    def __init__(self, devices: int = 2, fail_init: bool = False, new_api: bool = True) -> None:
        self.devices = devices
        self.fail_init = fail_init
        self.calls: dict[str, int] = {}
        self.shutdowns = 0
        if not new_api:  # bindings older than NVML 12.2 call them throttle reasons
            self.nvmlDeviceGetCurrentClocksThrottleReasons = self._reasons
        else:
            self.nvmlDeviceGetCurrentClocksEventReasons = self._reasons

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=97, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(used=30 << 30, total=40 << 30, free=10 << 30)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 230_000 if handle == 1 else 290_000  # mW

    def nvmlDeviceGetClockInfo(self, handle: int, kind: int) -> int:
        if kind == self.NVML_CLOCK_MEM:
            return 1215
        return 705 if handle == 1 else 1410

    def nvmlDeviceGetMaxClockInfo(self, handle: int, kind: int) -> int:
        return 1410

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return 89 if handle == 1 else 58

    def _reasons(self, handle: int) -> int:
        return 0x60 if handle == 1 else 0

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA A100-PG509-200"

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return 400_000

    def nvmlDeviceGetPcieThroughput(self, handle: int, counter: int) -> int:
        self._count("pcie")
        raise NotSupported("Not Supported")


def _sample(fake: FakeNvml, ticks: int) -> Sampler:
    s = Sampler(0.01, nvml=fake)
    s.start()
    deadline = time.monotonic() + 30
    while len(s.records) < ticks * fake.devices and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    return s


def test_samples_from_an_nvml_library_follow_the_contract(tmp_path: Path) -> None:
    fake = FakeNvml()
    s = _sample(fake, ticks=4)
    assert s.status == "captured" and len(s.records) >= 8
    samples = [GpuSample.model_validate(r) for r in s.records]
    first, throttled = samples[0], next(x for x in samples if x.gpu == 1)
    assert (first.name, first.sm_clock_max_mhz, first.power_limit_w) == ("NVIDIA A100-PG509-200", 1410, 400.0)
    assert (throttled.sm_clock_mhz, throttled.mem_clock_mhz, throttled.temperature_c) == (705, 1215, 89)
    assert throttled.power_w == 230.0 and throttled.throttle_reasons == 0x60
    assert throttled.utilization is not None and throttled.utilization.gpu == 97
    assert throttled.memory is not None and throttled.memory.total == 40 << 30
    assert all(x.name is None for x in samples[fake.devices * STATIC_TICKS :])  # static fields: first samples only
    assert fake.calls["pcie"] == 2 * fake.devices  # tx and rx refused once per device, never asked again
    assert all("pcieTxKBs" not in r and "nvlink" not in r for r in s.records)
    assert fake.shutdowns >= 2  # the probe's and the sampler's sessions are both closed
    written = write_records(s.records, tmp_path / "gpu_metrics.jsonl.gz", 1)
    lines = gzip.decompress((tmp_path / "gpu_metrics.jsonl.gz").read_bytes()).decode().splitlines()
    assert len(lines) == written and {GpuSample.model_validate_json(x).gpu for x in lines} == {1}


def test_older_bindings_give_throttle_reasons_too() -> None:
    s = _sample(FakeNvml(devices=1, new_api=False), ticks=2)
    assert {r["throttleReasons"] for r in s.records} == {0}


def test_an_nvml_that_does_not_start_is_reported_not_raised() -> None:
    fake = FakeNvml(fail_init=True)
    assert probe(fake) == "unavailable: NVML init failed (Driver Not Loaded)"
    s = Sampler(0.01, nvml=fake)
    s.start()
    s.stop()
    assert s.status == "unavailable: NVML init failed (Driver Not Loaded)" and s.records == []
    assert probe(FakeNvml(devices=0)) == "unavailable: no GPU devices"
