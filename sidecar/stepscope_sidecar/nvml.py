"""GPU metrics during the capture window through NVML (nvidia-ml-py); without NVML it says why."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PCIE_EVERY = 10  # PCIe throughput queries take ~20 ms each: sample them every 10th tick


def probe() -> str:
    """'available' or the reason GPU metrics cannot be recorded here."""
    try:
        import pynvml
    except ImportError:
        return "unavailable: nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"unavailable: NVML init failed ({exc})"
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception as exc:
        return f"unavailable: NVML device count failed ({exc})"
    finally:
        try:
            pynvml.nvmlShutdown()
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

    def __init__(self, interval_s: float) -> None:
        self.interval_s = max(0.01, min(interval_s, 0.1))  # at least 10 Hz
        self.records: list[dict[str, Any]] = []
        self.status = "not started"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        reason = probe()
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
        import pynvml

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


def write_records(records: list[dict[str, Any]], path: Path, device: int | None) -> int:
    """Write the samples of one device (all devices when `device` is None or absent) as gzipped JSON lines."""
    devices = {r.get("gpu") for r in records}
    chosen = [r for r in records if device is None or device not in devices or r.get("gpu") == device]
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for rec in chosen:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return len(chosen)
