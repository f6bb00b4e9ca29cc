"""GPU metrics during the capture window through NVML (nvidia-ml-py); without NVML it says why.

The records are the lines of gpu_metrics.jsonl.gz, whose format the contract documents
(stepscope_contract.gpu_metrics.GpuSample). The NVML library object is injectable (`nvml=`), so the sampling
path runs in tests against a stand-in library on machines without a GPU.
"""

from __future__ import annotations

import gzip
import importlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PCIE_EVERY = 10  # PCIe throughput queries take tens of milliseconds each: sample them every 10th tick
STATIC_TICKS = 3  # name, max SM clock and power limit do not change: written in the first samples only


def _library(nvml: Any | None) -> Any:
    """The NVML bindings: the given object, else the pynvml module (ImportError when it is not installed)."""
    return nvml if nvml is not None else importlib.import_module("pynvml")


def probe(nvml: Any | None = None) -> str:
    """'available' or the reason GPU metrics cannot be recorded here."""
    try:
        nv = _library(nvml)
    except ImportError:
        return "unavailable: nvidia-ml-py is not installed"
    try:
        nv.nvmlInit()
    except Exception as exc:
        return f"unavailable: NVML init failed ({exc})"
    try:
        count = int(nv.nvmlDeviceGetCount())
    except Exception as exc:
        return f"unavailable: NVML device count failed ({exc})"
    finally:
        try:
            nv.nvmlShutdown()
        except Exception as exc:  # shutdown trouble does not change the answer
            return f"unavailable: NVML shutdown failed ({exc})"
    return "available" if count > 0 else "unavailable: no GPU devices"


def _field(name: str, call: Callable[[], Any], unsupported: set[str], out: dict[str, Any]) -> None:
    if name in unsupported:
        return
    try:
        out[name] = call()
    except Exception:
        unsupported.add(name)  # the device does not report it: stop asking


class Sampler:
    """Samples every device at `interval_s` in a thread between start() and stop()."""

    def __init__(self, interval_s: float, nvml: Any | None = None) -> None:
        self.interval_s = max(0.01, min(interval_s, 0.1))  # at least 10 Hz
        self._nvml = nvml
        self.records: list[dict[str, Any]] = []
        self.status = "not started"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        reason = probe(self._nvml)
        if reason != "available":
            self.status = reason
            return
        self.status = "captured"
        self._thread = threading.Thread(target=self._run, name="stepscope-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        pynvml = _library(self._nvml)
        try:
            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:
            self.status = f"unavailable: NVML failed ({exc})"
            return
        unsupported: list[set[str]] = [set() for _ in handles]
        tick = 0
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                for index, handle in enumerate(handles):
                    self.records.append(self._sample(pynvml, index, handle, unsupported[index], tick))
                tick += 1
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))
        except Exception as exc:
            self.status = f"partial: sampling stopped ({exc})"
        finally:
            try:
                pynvml.nvmlShutdown()
            except Exception as exc:
                self.status = f"{self.status}; NVML shutdown failed ({exc})"

    @staticmethod
    def _sample(nv: Any, index: int, handle: Any, unsupported: set[str], tick: int) -> dict[str, Any]:
        rec: dict[str, Any] = {"t": round(time.time(), 4), "gpu": index}

        def util() -> dict[str, int]:
            u = nv.nvmlDeviceGetUtilizationRates(handle)
            return {"gpu": int(u.gpu), "memory": int(u.memory)}

        def memory() -> dict[str, int]:
            m = nv.nvmlDeviceGetMemoryInfo(handle)
            return {"used": int(m.used), "total": int(m.total)}

        _field("utilization", util, unsupported, rec)
        _field("memory", memory, unsupported, rec)
        _field("powerW", lambda: nv.nvmlDeviceGetPowerUsage(handle) / 1000.0, unsupported, rec)
        _field("smClockMHz", lambda: int(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)), unsupported, rec)
        _field("memClockMHz", lambda: int(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM)), unsupported, rec)
        _field(
            "temperatureC",
            lambda: int(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)),
            unsupported,
            rec,
        )
        _field("throttleReasons", lambda: _throttle_reasons(nv, handle), unsupported, rec)
        if tick < STATIC_TICKS:
            _field("name", lambda: _text(nv.nvmlDeviceGetName(handle)), unsupported, rec)
            _field(
                "smClockMaxMHz", lambda: int(nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM)), unsupported, rec
            )
            _field("powerLimitW", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0, unsupported, rec)
        if tick % PCIE_EVERY == 0:
            _field(
                "pcieTxKBs",
                lambda: int(nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_TX_BYTES)),
                unsupported,
                rec,
            )
            _field(
                "pcieRxKBs",
                lambda: int(nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_RX_BYTES)),
                unsupported,
                rec,
            )

        def nvlink() -> dict[str, int]:
            ids = [nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX]
            values = nv.nvmlDeviceGetFieldValues(handle, ids)
            out = {}
            for name, value in zip(("txKiB", "rxKiB"), values, strict=True):
                if int(value.nvmlReturn) != 0:
                    raise RuntimeError("not reported")
                out[name] = int(value.value.ullVal)
            return out

        _field("nvlink", nvlink, unsupported, rec)
        return rec


def _throttle_reasons(nv: Any, handle: Any) -> int:
    """NVML's clocks-event reasons mask (named 'throttle reasons' before NVML 12.2)."""
    call = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(call(handle))


def _text(value: Any) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return text[:256]


def write_records(records: list[dict[str, Any]], path: Path, device: int | None) -> int:
    """Write the samples of one device (all devices when `device` is None or absent) as gzipped JSON lines."""
    devices = {r.get("gpu") for r in records}
    chosen = [r for r in records if device is None or device not in devices or r.get("gpu") == device]
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for rec in chosen:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return len(chosen)
