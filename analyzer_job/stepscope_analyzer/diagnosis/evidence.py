"""Name-level evidence: which kernels, ops, functions or collectives take longer on a rank than the median
of the other ranks, per step. Pure.

Per-rank summaries keep only their top entries, so a name absent from a rank's summary counts as 0 there.
"""

from __future__ import annotations

from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.report import Cause, Evidence, RankReport

_FUNCTION_CATEGORIES: dict[Cause, frozenset[str]] = {
    Cause.COMPUTE: frozenset({"cpu_op", "kernel", "python"}),
    Cause.HOST: frozenset({"python", "cpu_op", "runtime", "user_annotation"}),
    Cause.MEMORY: frozenset({"memory"}),
    Cause.COMMUNICATION: frozenset({"communication"}),
}
_KERNEL_TYPES: dict[Cause, str] = {
    Cause.COMPUTE: "COMPUTATION",
    Cause.MEMORY: "MEMORY",
    Cause.COMMUNICATION: "COMMUNICATION",
}


def name_times(r: RankReport, cause: Cause, divisor: float) -> dict[tuple[str, str], float]:
    """(category, name) -> time per step on this rank, for the entries that bear on `cause`."""
    out: dict[tuple[str, str], float] = {}
    kernel_type = _KERNEL_TYPES.get(cause)
    if kernel_type is not None:
        for k in r.top_kernels:
            if k.kernel_type.upper() == kernel_type:
                key = ("kernel", k.name)
                out[key] = out.get(key, 0.0) + k.sum_us / divisor
    categories = _FUNCTION_CATEGORIES.get(cause, frozenset())
    for f in r.top_functions:
        if f.category in categories:
            key = (f.category, f.name)
            out[key] = max(out.get(key, 0.0), f.total_us / divisor)
    if cause is Cause.COMMUNICATION:
        for c in r.collectives:
            key = ("collective", c.name if c.process_group is None else f"{c.name} [{c.process_group}]")
            out[key] = out.get(key, 0.0) + max(c.total_us - c.wait_us, 0.0) / divisor
    return out


def name_evidence(
    rank: int,
    cause: Cause,
    tables: dict[int, dict[tuple[str, str], float]],
    step_us: float,
    limit: int,
) -> list[Evidence]:
    """The entries of `rank` that exceed the median of the other ranks the most (at least 1% of a step)."""
    mine = tables.get(rank, {})
    others = [t for r, t in tables.items() if r != rank]
    if not mine or not others:
        return []
    floor = 0.01 * step_us
    rows: list[tuple[float, Evidence]] = []
    for key, value in mine.items():
        baseline = median([t.get(key, 0.0) for t in others])
        excess = value - baseline
        if excess <= floor:
            continue
        ratio = f"{value / baseline:.2f}x the median of the others" if baseline > 0 else "absent on the other ranks"
        detail = f"{key[0]}; {ratio}; +{excess:,.0f} us per step"
        rows.append((excess, Evidence(metric=key[1], value=value, baseline=baseline, detail=detail)))
    rows.sort(key=lambda row: -row[0])
    return [e for _, e in rows[:limit]]
