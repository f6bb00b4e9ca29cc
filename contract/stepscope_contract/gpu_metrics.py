"""gpu_metrics.jsonl.gz beside a rank's trace: the sidecar's NVML samples, one JSON object per line.

The sidecar samples every visible GPU at the session's `spec.capture.gpuMetrics.intervalMs` (at least 10 Hz)
from the capture request until the hooks are done, and keeps the samples of the rank's own device (its
local rank) when that device is visible. The analyzer reads them back through `GpuSample`; unknown keys are
ignored, so a newer sidecar may add fields. A line (camelCase keys; absent keys: the device does not report it):

    {"t": 1716390922.1234, "gpu": 0, "name": "NVIDIA A100-SXM4-80GB",
     "utilization": {"gpu": 97, "memory": 41}, "memory": {"used": 31138512896, "total": 85899345920},
     "powerW": 312.5, "powerLimitW": 400.0, "smClockMHz": 1980, "smClockMaxMHz": 1980, "memClockMHz": 1593,
     "temperatureC": 64, "throttleReasons": 0, "pcieTxKBs": 1200, "pcieRxKBs": 800,
     "nvlink": {"txKiB": 0, "rxKiB": 0}}

- t: wall-clock time of the sample, Unix seconds; gpu: the device's NVML index.
- utilization: NVML utilisation rates, % (gpu: a kernel was running; memory: device memory was read/written).
- memory: device memory in bytes. powerW: board power draw; powerLimitW: the enforced power limit.
- smClockMHz / memClockMHz: current SM and memory clocks; smClockMaxMHz: the SM clock the device can reach.
- temperatureC: GPU core temperature. throttleReasons: NVML's clocks-event (throttle) reasons bit mask, decoded
  with THROTTLE_REASONS below.
- name, powerLimitW and smClockMaxMHz do not change during a capture: the sidecar writes them in the first
  samples only; pcie* every 10th sample (each query takes tens of milliseconds).
"""

from dataclasses import dataclass
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field


class _SampleModel(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


class GpuUtilization(_SampleModel):
    gpu: Annotated[float, Field(ge=0, le=100)]
    memory: float | None = Field(default=None, ge=0, le=100)


class GpuMemory(_SampleModel):
    used: Annotated[int, Field(ge=0)]
    total: int | None = Field(default=None, ge=0)


class GpuSample(_SampleModel):
    """One NVML sample of one device (one line of gpu_metrics.jsonl.gz)."""

    t: Annotated[float, Field(ge=0, description="Unix seconds")]
    gpu: Annotated[int, Field(ge=0, le=1023)] = 0
    name: str | None = Field(default=None, max_length=256)
    utilization: GpuUtilization | None = None
    memory: GpuMemory | None = None
    power_w: float | None = Field(default=None, ge=0, le=100_000, alias="powerW")
    power_limit_w: float | None = Field(default=None, ge=0, le=100_000, alias="powerLimitW")
    sm_clock_mhz: float | None = Field(default=None, ge=0, le=100_000, alias="smClockMHz")
    sm_clock_max_mhz: float | None = Field(default=None, ge=0, le=100_000, alias="smClockMaxMHz")
    mem_clock_mhz: float | None = Field(default=None, ge=0, le=100_000, alias="memClockMHz")
    temperature_c: float | None = Field(default=None, ge=-100, le=1000, alias="temperatureC")
    throttle_reasons: int | None = Field(default=None, ge=0, alias="throttleReasons")


@dataclass(frozen=True)
class ThrottleReason:
    """One bit of NVML's clocks-event reasons. `slowdown`: the GPU is held below the clock it could run at for a
    reason outside the job (heat, power, a hardware signal), as opposed to idling or a clock setting."""

    bit: int
    key: str
    label: str
    slowdown: bool


THROTTLE_REASONS: Final = (
    ThrottleReason(0x1, "gpu_idle", "GPU idle", False),
    ThrottleReason(0x2, "applications_clocks_setting", "applications clocks setting", False),
    ThrottleReason(0x4, "sw_power_cap", "power cap (software)", True),
    ThrottleReason(0x8, "hw_slowdown", "hardware slowdown", True),
    ThrottleReason(0x10, "sync_boost", "sync boost", False),
    ThrottleReason(0x20, "sw_thermal_slowdown", "thermal slowdown (software)", True),
    ThrottleReason(0x40, "hw_thermal_slowdown", "thermal slowdown (hardware)", True),
    ThrottleReason(0x80, "hw_power_brake_slowdown", "power brake (hardware)", True),
    ThrottleReason(0x100, "display_clock_setting", "display clock setting", False),
)
THROTTLE_BY_KEY: Final = {r.key: r for r in THROTTLE_REASONS}


def throttle_reasons_of(mask: int) -> list[ThrottleReason]:
    """The reasons set in an NVML clocks-event reasons mask (unknown bits are left out)."""
    return [r for r in THROTTLE_REASONS if mask & r.bit]
