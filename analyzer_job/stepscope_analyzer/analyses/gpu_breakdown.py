"""HTA's GPU breakdowns over one rank: temporal, comm/comp overlap, idle time per stream, per-kernel statistics.

Semantics follow HTA 0.5 exactly (see the golden outputs' semantics_notes): the kernel set is every kept row with
stream != -1; kernel_time = end of the last merged interval - start of the first; idle = kernel_time - union of all;
compute = union of COMPUTATION kernels; non_compute = kernel_time - compute - idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_analyzer.analyses.kernel_types import KernelType
from stepscope_analyzer.parse import TraceColumns

F64 = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Union = tuple[F64, F64]

KERNEL_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")
CONSECUTIVE_KERNEL_DELAY_US = 30.0


@dataclass
class Temporal:
    idle_time: float
    compute_time: float
    non_compute_time: float
    kernel_time: float
    all_union: Union
    comp_union: Union
    comm_union: Union
    mem_union: Union

    def pctg(self, value: float) -> float:
        return round(100.0 * value / self.kernel_time, 2) if self.kernel_time > 0 else 0.0

    @property
    def comm_time(self) -> float:
        return intervals.length(*self.comm_union)

    @property
    def comp_comm_overlap(self) -> float | None:
        comm = self.comm_time
        if comm <= 0:
            return None
        return 100.0 * intervals.intersection_length(self.comm_union, self.comp_union) / comm


def temporal_breakdown(ts: F64, end: F64, ktype: npt.NDArray[np.int8]) -> Temporal:
    """Inputs are the GPU-lane rows only (HTA's kernel set)."""
    all_u = intervals.merge(ts, end)
    comp = ktype == KernelType.COMPUTATION
    comm = ktype == KernelType.COMMUNICATION
    mem = ktype == KernelType.MEMORY
    comp_u = intervals.merge(ts[comp], end[comp])
    if all_u[0].size == 0:
        empty = (np.empty(0), np.empty(0))
        return Temporal(0.0, 0.0, 0.0, 0.0, empty, empty, empty, empty)
    kernel_time = float(all_u[1][-1] - all_u[0][0])
    idle = kernel_time - intervals.length(*all_u)
    compute = intervals.length(*comp_u)
    return Temporal(
        idle_time=idle,
        compute_time=compute,
        non_compute_time=kernel_time - compute - idle,
        kernel_time=kernel_time,
        all_union=all_u,
        comp_union=comp_u,
        comm_union=intervals.merge(ts[comm], end[comm]),
        mem_union=intervals.merge(ts[mem], end[mem]),
    )


@dataclass
class StreamIdle:
    stream: int
    host_wait: float = 0.0
    kernel_wait: float = 0.0
    other: float = 0.0
    categories: set[str] = field(default_factory=set)


def runtime_ts_of(ev: TraceColumns, keep: Mask, is_gpu: Mask) -> tuple[npt.NDArray[np.int64], F64]:
    """Sorted correlation ids of kept CPU-side events and their start times (last one wins, as in HTA's join)."""
    cpu = keep & ~is_gpu & (ev.correlation != -1)
    corr = ev.correlation[cpu]
    ts = ev.ts[cpu]
    # keep the last occurrence of each correlation id
    rev_corr = corr[::-1]
    uniq, first_in_rev = np.unique(rev_corr, return_index=True)
    return uniq, ts[::-1][first_in_rev]


def idle_breakdown(ev: TraceColumns, keep: Mask, is_gpu: Mask) -> list[StreamIdle]:
    """HTA idle-time breakdown per stream: host_wait, kernel_wait (< 30 us), other."""
    kmask = keep & (ev.stream != -1) & ev.cat_mask(*KERNEL_CATS)
    rows = np.flatnonzero(kmask)
    corr_sorted, corr_ts = runtime_ts_of(ev, keep, is_gpu)
    k_corr = ev.correlation[rows]
    pos = np.searchsorted(corr_sorted, k_corr)
    pos_c = np.minimum(pos, max(corr_sorted.size - 1, 0))
    found = (corr_sorted.size > 0) & (corr_sorted[pos_c] == k_corr) if corr_sorted.size else np.zeros(rows.size, bool)
    runtime_ts = np.where(found, corr_ts[pos_c] if corr_sorted.size else 0.0, np.nan)
    out: list[StreamIdle] = []
    streams = ev.stream[rows]
    # HTA iterates streams in order of first appearance
    _, first = np.unique(streams, return_index=True)
    for stream in streams[np.sort(first)].tolist():
        sel = streams == stream
        ts = ev.ts[rows[sel]]
        end = ts + ev.dur[rows[sel]]
        rts = runtime_ts[sel]
        order = np.argsort(ts, kind="stable")
        ts, end, rts = ts[order], end[order], rts[order]
        prev_end = np.concatenate(([np.nan], end[:-1]))
        gap = ts - prev_end
        with np.errstate(invalid="ignore"):
            host = rts > prev_end
            kwait = ~host & (gap < CONSECUTIVE_KERNEL_DELAY_US)
        other = ~host & ~kwait
        res = StreamIdle(stream=int(stream))
        res.host_wait = float(np.nansum(gap[host]))
        res.kernel_wait = float(np.nansum(gap[kwait]))
        res.other = float(np.nansum(gap[other]))
        res.categories = {
            name for name, m in (("host_wait", host), ("kernel_wait", kwait), ("other", other)) if m.any()
        }
        out.append(res)
    return out


@dataclass
class KernelStats:
    name_id: int
    kernel_type: KernelType
    count: int
    sum: float
    max: float
    min: float
    mean: float
    std: float


def _group(name_id: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """np.unique(name_id, return_inverse=True) for small non-negative ids, in linear time (a count per id)."""
    counts = np.bincount(name_id) if name_id.size else np.zeros(0, dtype=np.intp)
    ids = np.flatnonzero(counts)
    slot = np.zeros(counts.size, dtype=np.intp)
    slot[ids] = np.arange(ids.size)
    return ids, slot[name_id]


def kernel_stats(name_id: npt.NDArray[np.int32], dur: F64, ktype: npt.NDArray[np.int8]) -> list[KernelStats]:
    """Per kernel name (COMPUTATION, COMMUNICATION, MEMORY): count, sum, max, min, mean, sample stddev (0 if n=1)."""
    keep = ktype != KernelType.OTHER
    ids, inv = _group(name_id[keep])
    d = dur[keep]
    count = np.bincount(inv, minlength=ids.size).astype(np.float64)
    total = np.bincount(inv, weights=d, minlength=ids.size)
    mean = total / np.maximum(count, 1)
    sq = np.bincount(inv, weights=(d - mean[inv]) ** 2, minlength=ids.size)
    std = np.where(count > 1, np.sqrt(sq / np.maximum(count - 1, 1)), 0.0)
    mx = np.full(ids.size, -np.inf)
    mn = np.full(ids.size, np.inf)
    np.maximum.at(mx, inv, d)
    np.minimum.at(mn, inv, d)
    types = np.zeros(ids.size, dtype=np.int8)
    types[inv] = ktype[keep]
    stats = [
        KernelStats(
            int(ids[i]),
            KernelType(int(types[i])),
            int(count[i]),
            float(total[i]),
            float(mx[i]),
            float(mn[i]),
            float(mean[i]),
            float(std[i]),
        )
        for i in range(ids.size)
    ]
    stats.sort(key=lambda s: s.sum, reverse=True)
    return stats
