"""What a trace says about where it ran: backend and NCCL version, CUDA versions, device names, host, and the
wall-clock window its steps cover. Pure.

Kineto writes event times in µs on a clock whose zero is `baseTimeNanoseconds` (Unix ns) when that key exists,
and in Unix µs otherwise; the window is the first recorded step's start to the last one's end (all events when
the trace has no ProfilerStep).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from stepscope_analyzer.analyses.steps import step_rows
from stepscope_analyzer.parse import ParsedTrace
from stepscope_contract.report import RankEnvironment

MAX_TEXT = 256
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
_LATEST = datetime(2200, 1, 1, tzinfo=UTC).timestamp()


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text[:MAX_TEXT] or None


def cuda_version(value: Any) -> str | None:
    """Kineto records CUDA versions as CUDA's integers (12040 is 12.4); other text is kept as it is."""
    text = _text(value)
    if text is None:
        return None
    if text.isdigit() and int(text) >= 1000:
        number = int(text)
        return f"{number // 1000}.{(number % 1000) // 10}"
    return text


def device_names(metadata: dict[str, Any]) -> str | None:
    """The GPU model of the trace's devices ('A, B' when they differ); None when the trace lists none."""
    props = metadata.get("deviceProperties")
    if not isinstance(props, list):
        return None
    names: list[str] = []
    for p in props[:64]:
        name = _text(p.get("name")) if isinstance(p, dict) else None
        if name and name not in names:
            names.append(name)
    return ", ".join(names)[:MAX_TEXT] or None


def wall_window(trace: ParsedTrace) -> tuple[float, float] | None:
    """(start, end) of the recorded steps in Unix seconds, or None when the trace's clock is not plausible."""
    ev = trace.events
    rows = step_rows(ev)
    if rows.size:
        start_us = float(ev.ts[rows].min())
        end_us = float((ev.ts[rows] + ev.dur[rows]).max())
    elif len(ev):
        start_us = float(ev.ts.min())
        end_us = float(np.max(ev.ts + ev.dur))
    else:
        return None
    base = trace.metadata.get("baseTimeNanoseconds")
    offset = float(base) / 1e9 if isinstance(base, int | float) and not isinstance(base, bool) else 0.0
    start, end = offset + start_us / 1e6, offset + end_us / 1e6
    if not (_EARLIEST <= start <= end <= _LATEST):
        return None
    return start, end


def trace_environment(trace: ParsedTrace) -> RankEnvironment:
    """The environment a trace records (fields it does not hold stay None)."""
    md = trace.metadata
    info = trace.distributed_info
    window = wall_window(trace)
    return RankEnvironment(
        hostname=_text(md.get("host_name") or md.get("hostname")),
        backend=_text(info.get("backend")),
        nccl_version=_text(info.get("nccl_version")),
        cuda_runtime_version=cuda_version(md.get("cuda_runtime_version")),
        cuda_driver_version=cuda_version(md.get("cuda_driver_version")),
        device_name=device_names(md),
        window_start=datetime.fromtimestamp(window[0], UTC) if window else None,
        window_end=datetime.fromtimestamp(window[1], UTC) if window else None,
    )
