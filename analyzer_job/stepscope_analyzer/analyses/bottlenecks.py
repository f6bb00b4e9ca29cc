"""Bottleneck ratios per function: time not overlapped by compute / end-to-end time of the window.

For one name, its intervals are merged first (nested or concurrent calls count once). Names whose work *is* the
compute (compute kernels, CPU compute ops) are charged their whole merged time; every other name is charged only
the part that no compute overlaps (the exposed part).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import interval_kernels, intervals
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


BLOCK_ROWS = 1 << 15
"""names are handled at once in blocks of about this many rows (whole names), which bounds the temporaries"""


def per_name(name_id: npt.NDArray[np.int32], ts: F64, end: F64, compute: Union) -> list[NameTime]:
    """Group rows by name: count, summed duration, merged time, merged time not covered by ``compute``.

    Many names at once: the rows, sorted by (name, start), are laid on one axis with each name's rows shifted past
    the previous name's (by whole spans), so one pass merges every name's intervals apart from the others'. Only
    the merge decisions use the shifted times, and only when the shift is exact for every row (checked; else a loop
    per name); the merged pieces take their bounds from the original times, and their lengths and overlap with
    ``compute`` are summed per name. Names go in blocks of about BLOCK_ROWS rows, so the temporaries stay small."""
    if name_id.size == 0:
        return []
    order = by_name_then_start(name_id, ts)
    ids = name_id[order]
    s = ts[order]
    # HTA's ns rounding (ceil start, floor end) can leave sub-microsecond events with end < start: count them as 0
    e = np.maximum(end[order], s)
    del order
    first = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    stops = np.append(first[1:], ids.size)
    cover = intervals.Coverage(*compute)
    native = interval_kernels.name_times(s, e, first, (cover.starts, cover.ends, cover.cum))
    if native is not None:
        total, merged, covered = native
        counts = stops - first
        return [
            NameTime(i, c, t, m, m - x)
            for i, c, t, m, x in zip(
                ids[first].tolist(), counts.tolist(), total.tolist(), merged.tolist(), covered.tolist(), strict=True
            )
        ]
    out: list[NameTime] = []
    cuts = np.concatenate(([0], np.flatnonzero(np.diff(first // BLOCK_ROWS)) + 1, [first.size]))
    for a, b in itertools.pairwise(cuts.tolist()):
        lo, hi = int(first[a]), int(stops[b - 1])
        out += _names_at_once(ids[lo:hi], s[lo:hi], e[lo:hi], first[a:b] - lo, cover)
    return out


def by_name_then_start(name_id: npt.NDArray[np.int32], ts: F64) -> npt.NDArray[np.intp]:
    """np.lexsort((ts, name_id)) in two stable passes, the second by 16-bit ids where they fit (numpy sorts those
    by radix, in linear time), faster than lexsort on a real trace's cpu_op rows (bench/analyzer_vs_hta.py)."""
    order = np.argsort(ts, kind="stable")
    ids = name_id[order]
    if ids.size and int(ids.min()) >= 0 and int(ids.max()) < 2**15:
        ids = ids.astype(np.int16)
    by_name: npt.NDArray[np.intp] = order[np.argsort(ids, kind="stable")]
    return by_name


def _names_at_once(
    ids: npt.NDArray[np.int32], s: F64, e: F64, first: npt.NDArray[np.intp], cover: intervals.Coverage
) -> list[NameTime]:
    """per_name for rows sorted by (name, start) whose names start at `first`."""
    group = np.zeros(ids.size, dtype=np.int64)
    group[first[1:]] = 1
    np.cumsum(group, out=group)
    t0 = float(np.min(s))
    shift = group * (float(np.max(e)) - t0 + 1.0) - t0
    shifted_s, shifted_e = s + shift, e + shift
    if not (np.array_equal(shifted_s - shift, s) and np.array_equal(shifted_e - shift, e)):
        return _per_name_loop(ids, s, e, first, cover)
    del shift
    piece_first = _merge_starts(shifted_s, shifted_e)
    del shifted_s, shifted_e
    starts, ends = s[piece_first], np.maximum.reduceat(e, piece_first)
    piece_group = group[piece_first]
    covered = cover.within(starts, ends) if cover.starts.size else np.zeros(starts.size)
    n = first.size
    merged = np.bincount(piece_group, weights=ends - starts, minlength=n)
    exposed = merged - np.bincount(piece_group, weights=covered, minlength=n)
    total = np.bincount(group, weights=e - s, minlength=n)
    counts = np.diff(np.append(first, ids.size))
    return [
        NameTime(i, c, t, m, x)
        for i, c, t, m, x in zip(
            ids[first].tolist(), counts.tolist(), total.tolist(), merged.tolist(), exposed.tolist(), strict=True
        )
    ]


def _merge_starts(s: F64, e: F64) -> npt.NDArray[np.intp]:
    """For intervals sorted by start, the index of the first interval of each merged piece (an interval starting
    after every earlier one has ended begins a piece; touching ones merge, as in intervals.merge)."""
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
    return np.flatnonzero(new)


def _per_name_loop(
    ids: npt.NDArray[np.int32], s: F64, e: F64, first: npt.NDArray[np.intp], cover: intervals.Coverage
) -> list[NameTime]:
    """The same, one name at a time (times whose shift would not be exact)."""
    stops = np.append(first[1:], ids.size)
    out: list[NameTime] = []
    for lo, hi in zip(first.tolist(), stops.tolist(), strict=True):
        u = intervals.merge(s[lo:hi], e[lo:hi])
        merged = intervals.length(*u)
        covered = cover.intersection(u)
        out.append(NameTime(int(ids[lo]), hi - lo, float(np.sum(e[lo:hi] - s[lo:hi])), merged, merged - covered))
    return out


def bottlenecks(
    names: list[str],
    times: list[NameTime],
    category: str,
    window: float,
    *,
    is_compute: bool,
    top_n: int,
    once: bool = False,
    self_us: F64 | None = None,
) -> list[Bottleneck]:
    """Bottleneck rows of `times`. With `once` (collectives, which gloo records on two threads) a name's total is
    its merged time, so that a call recorded twice counts once. `self_us`: summed self time per name id
    (self_times.py); None for leaf work (kernels, collectives), whose self time is its time."""
    if window <= 0:
        return []

    def row(t: NameTime) -> Bottleneck:
        total = t.merged if once else t.total
        return Bottleneck(
            name=names[t.name_id],
            category=category,
            count=t.count,
            total_us=total,
            self_us=total if self_us is None else min(float(self_us[t.name_id]), total),
            mean_us=total / t.count if t.count else 0.0,
            bottleneck_ratio=min(1.0, (t.merged if is_compute else t.exposed) / window),
        )

    rows = [row(t) for t in times]
    rows.sort(key=lambda b: (b.bottleneck_ratio, b.total_us), reverse=True)
    return rows[:top_n]
