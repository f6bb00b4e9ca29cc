"""A rank's GPU metrics over its captured window, from the sidecar's NVML samples (gpu_metrics.jsonl.gz).

The sample format is the contract's (stepscope_contract.gpu_metrics.GpuSample). Samples are kept inside the
window the trace recorded (first step start to last step end, on the wall clock) so that the clocks and power
describe the steps that were analysed, not the wait before the capture. Input is bounded: at most
MAX_METRICS_BYTES inflated and MAX_SAMPLES lines; lines that do not parse are counted and skipped. Pure apart
from inflating bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import ValidationError

from stepscope_analyzer.parse.stream import InflateError, inflate_bounded
from stepscope_contract.gpu_metrics import THROTTLE_REASONS, GpuSample
from stepscope_contract.report import GPU_SERIES_POINTS, GpuMetrics, GpuSeries, MetricStats, ThrottleShare

MAX_METRICS_BYTES = 64 << 20
MAX_SAMPLES = 200_000
WINDOW_MARGIN_S = 0.0
"""how far outside the steps' window a sample still counts (the sampler starts at the request, before the steps:
samples from before the window would mix the idle GPU into the figures)"""


class GpuMetricsError(ValueError):
    """The samples cannot be read at all (corrupt gzip, too large); the message says why."""


def inflate(data: bytes, limit: int = MAX_METRICS_BYTES) -> bytes:
    """The file's text: gzip inflated up to `limit` bytes, or the bytes as they are when not gzip (a truncated
    stream gives what inflates)."""
    try:
        return inflate_bounded(data, limit)[0]
    except InflateError as exc:
        raise GpuMetricsError(f"the gpu metrics file {exc}") from exc


def parse_samples(text: bytes, max_samples: int = MAX_SAMPLES) -> tuple[list[GpuSample], int]:
    """(samples, skipped lines) from JSON lines; blank lines are ignored, lines beyond `max_samples` skipped."""
    samples: list[GpuSample] = []
    skipped = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if len(samples) >= max_samples:
            skipped += 1
            continue
        try:
            samples.append(GpuSample.model_validate_json(line))
        except (ValidationError, ValueError):
            skipped += 1
    return samples, skipped


def pick_device(samples: Sequence[GpuSample], local_rank: int | None) -> int | None:
    """The device the rank ran on: its local rank when those samples exist, else the only (or lowest) one."""
    devices = sorted({s.gpu for s in samples})
    if not devices:
        return None
    if local_rank is not None and local_rank in devices:
        return local_rank
    return devices[0]


def in_window(samples: Sequence[GpuSample], window: tuple[float, float] | None) -> list[GpuSample]:
    """Samples inside the window (with a small margin); all of them when fewer than two fall inside."""
    ordered = sorted(samples, key=lambda s: s.t)
    if window is None:
        return ordered
    start, end = window[0] - WINDOW_MARGIN_S, window[1] + WINDOW_MARGIN_S
    inside = [s for s in ordered if start <= s.t <= end]
    return inside if len(inside) >= 2 else ordered


def _stats(values: Sequence[float | None]) -> MetricStats | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    arr = np.asarray(known, dtype=np.float64)
    return MetricStats(mean=round(float(arr.mean()), 2), min=float(arr.min()), max=float(arr.max()))


def _throttle(samples: Sequence[GpuSample]) -> list[ThrottleShare]:
    masks = [s.throttle_reasons for s in samples if s.throttle_reasons is not None]
    if not masks:
        return []
    seen: Counter[str] = Counter()
    for mask in masks:
        for reason in THROTTLE_REASONS:
            if mask & reason.bit:
                seen[reason.key] += 1
    by_key = {r.key: r for r in THROTTLE_REASONS}
    shares = [
        ThrottleShare(
            reason=key,
            label=by_key[key].label,
            slowdown=by_key[key].slowdown,
            share=round(count / len(masks), 3),
        )
        for key, count in seen.items()
    ]
    shares.sort(key=lambda s: (-s.share, s.reason))
    return shares


def _thin(values: Sequence[float | None], buckets: list[range]) -> list[float | None]:
    """The mean of each bucket's known values (None where a bucket has none)."""
    out: list[float | None] = []
    for bucket in buckets:
        known = [v for v in (values[i] for i in bucket) if v is not None]
        out.append(round(sum(known) / len(known), 1) if known else None)
    return out


def series(samples: Sequence[GpuSample], start: float, points: int = GPU_SERIES_POINTS) -> GpuSeries:
    """Clock, power and temperature over time, averaged into at most `points` buckets of consecutive samples."""
    n = len(samples)
    if n == 0:
        return GpuSeries()
    per = max(1, -(-n // points))
    buckets = [range(i, min(i + per, n)) for i in range(0, n, per)]
    times = [s.t - start for s in samples]
    return GpuSeries(
        t_s=[round(sum(times[i] for i in b) / len(b), 3) for b in buckets],
        sm_clock_mhz=_thin([s.sm_clock_mhz for s in samples], buckets),
        power_w=_thin([s.power_w for s in samples], buckets),
        temperature_c=_thin([s.temperature_c for s in samples], buckets),
    )


def _first(samples: Sequence[GpuSample], get: Callable[[GpuSample], float | str | int | None]) -> object:
    return next((v for v in map(get, samples) if v is not None), None)


def summarize_samples(
    samples: Sequence[GpuSample], *, window: tuple[float, float] | None = None, local_rank: int | None = None
) -> GpuMetrics | None:
    """GpuMetrics of the rank's device over the window (Unix seconds), or None without any sample."""
    device = pick_device(samples, local_rank)
    if device is None:
        return None
    mine = [s for s in samples if s.gpu == device]
    used = in_window(mine, window)
    name = _first(mine, lambda s: s.name)
    max_clock = max((s.sm_clock_max_mhz for s in mine if s.sm_clock_max_mhz is not None), default=None)
    power_limit = max((s.power_limit_w for s in mine if s.power_limit_w is not None), default=None)
    total = max((s.memory.total for s in mine if s.memory is not None and s.memory.total is not None), default=None)
    return GpuMetrics(
        gpu=device,
        name=str(name)[:256] if name is not None else None,
        samples=len(used),
        window_s=round(used[-1].t - used[0].t, 3),
        sm_clock_mhz=_stats([s.sm_clock_mhz for s in used]),
        sm_clock_max_mhz=max_clock,
        mem_clock_mhz=_stats([s.mem_clock_mhz for s in used]),
        power_w=_stats([s.power_w for s in used]),
        power_limit_w=power_limit,
        temperature_c=_stats([s.temperature_c for s in used]),
        utilization_pct=_stats([s.utilization.gpu if s.utilization else None for s in used]),
        memory_utilization_pct=_stats([s.utilization.memory if s.utilization else None for s in used]),
        memory_used_bytes=_stats([float(s.memory.used) if s.memory else None for s in used]),
        memory_total_bytes=total,
        throttle=_throttle(used),
        series=series(used, used[0].t),
    )


def read_gpu_metrics(
    data: bytes, *, window: tuple[float, float] | None = None, local_rank: int | None = None
) -> tuple[GpuMetrics | None, int]:
    """(GpuMetrics or None, lines skipped) from the bytes of gpu_metrics.jsonl(.gz); GpuMetricsError if unreadable."""
    samples, skipped = parse_samples(inflate(data))
    return summarize_samples(samples, window=window, local_rank=local_rank), skipped
