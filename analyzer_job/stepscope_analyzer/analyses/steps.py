"""Step times from ProfilerStep#N annotations on the host (CPU) side."""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses.sorted_values import median
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import StepStats

_STEP = re.compile(r"^ProfilerStep#\d+")
_NUMBER = re.compile(r"^ProfilerStep#(\d+)$")


def step_rows(ev: TraceColumns) -> npt.NDArray[np.int64]:
    """Rows of host-side ProfilerStep#N events, ordered by start time."""
    ids = [i for i, n in enumerate(ev.names) if _STEP.match(n)]
    if not ids:
        return np.empty(0, dtype=np.int64)
    gpu_ann = ev.cat_code("gpu_user_annotation")
    mask = ev.name_mask(ids) & (ev.stream == -1) & (ev.cat_id != gpu_ann)
    rows = np.flatnonzero(mask)
    return rows[np.argsort(ev.ts[rows], kind="stable")]


def step_stats(ev: TraceColumns) -> StepStats:
    rows = step_rows(ev)
    return stats_of(ev.dur[rows], step_numbers(ev, rows)) if rows.size else StepStats()


def step_number(name: str) -> int | None:
    """N of a 'ProfilerStep#N' name, else None."""
    m = _NUMBER.match(name)
    return int(m.group(1)) if m is not None and len(m.group(1)) <= 18 else None


def step_numbers(ev: TraceColumns, rows: npt.NDArray[np.int64]) -> list[int]:
    """N of each ProfilerStep#N span in `rows`; empty unless every one is numbered (and numbers are distinct)."""
    out: list[int] = []
    for nid in ev.name_id[rows].tolist():
        n = step_number(ev.names[nid])
        if n is None:
            return []
        out.append(n)
    return out if len(set(out)) == len(out) else []


def stats_of(dur: npt.NDArray[np.float64], numbers: list[int] | None = None) -> StepStats:
    """Step statistics of the given step durations (µs, in recorded order) and their step numbers."""
    if dur.size == 0:
        return StepStats()
    mid = median(dur)
    return StepStats(
        count=int(dur.size),
        median_us=mid,
        mean_us=float(dur.mean()),
        min_us=float(dur.min()),
        max_us=float(dur.max()),
        spread_pct=0.0 if mid <= 0 else 100.0 * float(dur.max() - dur.min()) / mid,
        durations_us=[float(d) for d in dur],
        numbers=numbers if numbers is not None and len(numbers) == dur.size else [],
    )
