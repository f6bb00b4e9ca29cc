"""HTA's default event selection (TraceAnalysis with include_last_profiler_step=False).

With more than one ProfilerStep name, CPU events starting at/after the last ProfilerStep's start are dropped and GPU
events are kept only if their correlation id matches a kept CPU event; with zero or one ProfilerStep nothing is
dropped. GPU events here are HTA's: (stream >= 0 and correlation >= 0) or named 'Event Sync' / 'Context Sync'.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.parse import TraceColumns

Mask = npt.NDArray[np.bool_]


def gpu_event_mask(ev: TraceColumns) -> Mask:
    sync_ids = [i for i, n in enumerate(ev.names) if n in ("Event Sync", "Context Sync")]
    mask = (ev.stream >= 0) & (ev.correlation >= 0)
    if sync_ids:
        mask |= ev.name_mask(sync_ids)
    return mask


def hta_keep_mask(ev: TraceColumns, is_gpu: Mask | None = None) -> Mask:
    """Rows HTA keeps for its breakdowns."""
    n = len(ev)
    step_ids = [i for i, name in enumerate(ev.names) if "ProfilerStep" in name]
    if len(step_ids) <= 1:
        return np.ones(n, dtype=bool)
    gpu = gpu_event_mask(ev) if is_gpu is None else is_gpu
    cpu = ~gpu
    steps = cpu & ev.name_mask(step_ids)
    if not steps.any():
        return np.ones(n, dtype=bool)
    last_start = float(ev.ts[steps].max())
    keep_cpu = cpu & (ev.ts < last_start)
    keep_gpu = gpu.copy()
    keep_gpu[gpu] = _member(ev.correlation[gpu], ev.correlation[keep_cpu])
    return keep_cpu | keep_gpu


def _member(values: npt.NDArray[np.int64], among: npt.NDArray[np.int64]) -> Mask:
    """For each value, whether `among` holds it (one sort of `among` and a binary search per value)."""
    if among.size == 0:
        return np.zeros(values.shape, dtype=bool)
    table = np.sort(among)
    at = np.minimum(np.searchsorted(table, values), table.size - 1)
    found: Mask = table[at] == values
    return found
