"""Each slow rank beside the median of the other ranks: the kernels (GPU ranks) or ops and functions (CPU ranks)
whose time per step differs most, with their calls per step, so that "rank 5's sm80_xmma_gemm takes 1.35x
longer, same count" or "rank 0 runs 8 extra aten::copy_ per step" can be read off one table. Pure.

Per-rank summaries keep only their top entries, so a name missing from a rank's summary counts 0 there (as in
the evidence). Collectives are left out: their time on the other ranks is mostly waiting for the slow one; for the
same reason an entry where the slow rank spends less time than the others with the same count (a region that
holds a collective, such as DDP's backward) is left out too.
"""

from __future__ import annotations

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.report import Diagnosis, NameComparison, RankReport

MAX_ROWS = 12
MIN_STEP_SHARE = 0.001
"""a time difference below this share of the median step is not listed (unless the count differs)"""
MIN_COUNT_DIFF = 0.5
"""calls per step that differ by less than this are the same count"""
SAME_TIME = 0.02
"""times within 2% of each other are the same time"""
_KERNEL_CATEGORY = {"COMPUTATION": "kernel", "MEMORY": "memory"}
_HOST_CATEGORIES = frozenset({"cpu_op", "python", "user_annotation", "runtime"})

Key = tuple[str, str]


def _steps(r: RankReport) -> float:
    return float(r.steps.count) if r.steps.count > 0 else 1.0


def per_step_entries(r: RankReport) -> dict[Key, tuple[float, float]]:
    """(category, name) -> (time, calls) per step: GPU kernels on GPU ranks, host ops and functions on CPU ranks."""
    steps = _steps(r)
    out: dict[Key, tuple[float, float]] = {}
    if r.top_kernels:
        for k in r.top_kernels:
            category = _KERNEL_CATEGORY.get(k.kernel_type.upper())
            if category is not None:
                t, c = out.get((category, k.name), (0.0, 0.0))
                out[(category, k.name)] = (t + k.sum_us / steps, c + k.count / steps)
        return out
    for f in r.top_functions:
        if f.category in _HOST_CATEGORIES:
            key = (f.category, f.name)
            t, c = out.get(key, (0.0, 0.0))
            out[key] = (max(t, f.total_us / steps), max(c, f.count / steps))
    return out


def describe(time_us: float, base_us: float, count: float, base_count: float) -> str:
    """The difference in words: '1.35x longer, same count', '8 extra per step', 'only on this rank'."""
    if base_us <= 0 and base_count <= 0:
        return f"only on this rank ({count:.3g} per step)"
    if time_us <= 0 and count <= 0:
        return f"not on this rank ({base_count:.3g} per step on the others)"
    delta = count - base_count
    if abs(delta) < MIN_COUNT_DIFF:
        calls = "same count"
    elif delta > 0:
        calls = f"{delta:.0f} extra per step"
    else:
        calls = f"{-delta:.0f} fewer per step"
    if base_us <= 0:
        return calls
    ratio = time_us / base_us
    if abs(ratio - 1.0) < SAME_TIME:
        speed = "same time"
    else:
        speed = f"{ratio:.2f}x longer" if ratio > 1.0 else f"{ratio:.2f}x the time"
    return f"{speed}, {calls}" if abs(delta) < MIN_COUNT_DIFF else f"{calls}, {speed}"


def compare_rank(rank: RankReport, others: list[RankReport], step_us: float) -> list[NameComparison]:
    """The entries of `rank` that differ most (in time per step) from the median of `others`."""
    if not others:
        return []
    mine = per_step_entries(rank)
    theirs = [per_step_entries(o) for o in others]
    keys = set(mine).union(*theirs)
    floor = MIN_STEP_SHARE * step_us
    rows: list[tuple[float, NameComparison]] = []
    for key in keys:
        t, c = mine.get(key, (0.0, 0.0))
        base_t = median([e.get(key, (0.0, 0.0))[0] for e in theirs])
        base_c = median([e.get(key, (0.0, 0.0))[1] for e in theirs])
        same_count = abs(c - base_c) < MIN_COUNT_DIFF
        if same_count and (t - base_t < floor):  # no difference, or the others waiting there for this rank
            continue
        rows.append(
            (
                abs(t - base_t),
                NameComparison(
                    name=key[1],
                    category=key[0],
                    time_us=round(t, 1),
                    baseline_time_us=round(base_t, 1),
                    count=round(c, 2),
                    baseline_count=round(base_c, 2),
                    ratio=round(t / base_t, 3) if base_t > 0 else None,
                    summary=describe(t, base_t, c, base_c),
                ),
            )
        )
    rows.sort(key=lambda row: (-row[0], row[1].name))
    return [row for _, row in rows[:MAX_ROWS]]


def with_comparisons(diagnosis: Diagnosis, ranks: list[RankReport]) -> Diagnosis:
    """The diagnosis with each slow rank's comparison against the median of the other analysed ranks."""
    by_rank = {r.rank: r for r in ranks}
    step_us = diagnosis.median_step_us or median([r.steps.median_us for r in ranks if r.steps.median_us > 0])
    slow = []
    for s in diagnosis.slow_ranks:
        rank = by_rank.get(s.rank)
        if rank is None or s.cause in STANDSTILL:
            slow.append(s)
            continue
        others = [r for r in ranks if r.rank != s.rank]
        slow.append(s.model_copy(update={"comparison": compare_rank(rank, others, step_us)}))
    return diagnosis.model_copy(update={"slow_ranks": slow})
