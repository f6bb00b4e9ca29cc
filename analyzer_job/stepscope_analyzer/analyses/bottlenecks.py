"""Bottleneck ratios per function: time not overlapped by compute / end-to-end time of the window.

For one name, its intervals are merged first (nested or concurrent calls count once). Names whose work *is* the
compute (compute kernels, CPU compute ops) are charged their whole merged time; every other name is charged only
the part that no compute overlaps (the exposed part).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import intervals
from stepscope_contract.report import Bottleneck

F64 = npt.NDArray[np.float64]
Union = tuple[F64, F64]


@dataclass
class NameTime:
    name_id: int
    count: int
    total: float  # sum of durations
    merged: float  # union of its intervals
    exposed: float  # union minus the part overlapped by compute


def per_name(name_id: npt.NDArray[np.int32], ts: F64, end: F64, compute: Union) -> list[NameTime]:
    """Group rows by name: count, summed duration, merged time, merged time not covered by ``compute``."""
    if name_id.size == 0:
        return []
    order = np.argsort(name_id, kind="stable")
    ids = name_id[order]
    s = ts[order]
    # HTA's ns rounding (ceil start, floor end) can leave sub-microsecond events with end < start: count them as 0
    e = np.maximum(end[order], s)
    cuts = np.flatnonzero(np.diff(ids)) + 1
    starts = np.concatenate(([0], cuts))
    stops = np.concatenate((cuts, [ids.size]))
    out: list[NameTime] = []
    cover = intervals.Coverage(*compute)
    for lo, hi in zip(starts.tolist(), stops.tolist(), strict=True):
        u = intervals.merge(s[lo:hi], e[lo:hi])
        merged = intervals.length(*u)
        covered = cover.intersection(u)
        out.append(NameTime(int(ids[lo]), hi - lo, float(np.sum(e[lo:hi] - s[lo:hi])), merged, merged - covered))
    return out


def bottlenecks(
    names: list[str], times: list[NameTime], category: str, window: float, *, is_compute: bool, top_n: int
) -> list[Bottleneck]:
    if window <= 0:
        return []
    rows = [
        Bottleneck(
            name=names[t.name_id],
            category=category,
            count=t.count,
            total_us=t.total,
            mean_us=t.total / t.count if t.count else 0.0,
            bottleneck_ratio=min(1.0, (t.merged if is_compute else t.exposed) / window),
        )
        for t in times
    ]
    rows.sort(key=lambda b: (b.bottleneck_ratio, b.total_us), reverse=True)
    return rows[:top_n]
