"""Ranks that share an oversubscribed CPU, and what a rank's extra work costs the others there. Pure.

A node is busy when two or more of the job's ranks run on it and the median of their step dilations (how much
waiting for a CPU stretched their work, diagnosis.rank_costs) is BUSY_DILATION or more: its ranks want more CPU than
it has. There the ranks do not only wait for one another at their collectives, they take CPU time from one another:
a rank whose call floors prove extra work (diagnosis.floor_test) slows the ranks beside it through the CPU they
share, even where they hardly wait for it at a collective (the scheduler may run the busy rank first and stretch the
others' work instead). diagnosis.slow_ranks therefore takes such a rank's extra work for a cost to the job without
the wait check, and leaves the figure to the replay (diagnosis.dp_replay), which uses `shared_saving`: the CPUs of
a busy node are shared among the work that wants them, so the CPU work a change takes off shortens every rank's
stretched work there by the share of the node's stretched work it is, never below a rank's CPU work (nothing runs
faster than its CPU time), and the step by at most the CPU work taken off.

BUSY_DILATION is chosen, not fitted: work half as long again as its CPU time is waiting for a CPU a third of the
time, more than the scheduling jitter of a node with CPUs to spare.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from stepscope_analyzer.diagnosis.rank_costs import RankSamples

BUSY_DILATION = 1.5
"""the median step dilation of a node's ranks from which its CPUs count as oversubscribed"""


def dilation(s: RankSamples) -> float:
    """The rank's median step dilation: its wall-clock compute over the same without CPU-contention stretches."""
    wall, tested = s.costs["compute"], s.tested["compute"]
    ok = tested > 0
    return float(np.median(wall[ok] / tested[ok])) if ok.any() else 1.0


def busy_ranks(samples: Iterable[RankSamples]) -> frozenset[int]:
    """The ranks on busy nodes (module docstring): a node is RankSamples.machine (the node, else the trace's host
    name); ranks with neither are on none."""
    by_node: dict[str, list[RankSamples]] = {}
    for s in samples:
        if s.machine is not None:
            by_node.setdefault(s.machine, []).append(s)
    busy: set[int] = set()
    for mates in by_node.values():
        if len(mates) >= 2 and float(np.median([dilation(s) for s in mates])) >= BUSY_DILATION:
            busy.update(s.rank for s in mates)
    return frozenset(busy)


def cpu_work(s: RankSamples, work: list[float]) -> list[float]:
    """A rank's work per step (`work`, wall-clock) less the CPU-contention stretches of its compute and host time."""
    stretch = (s.costs["compute"] - s.tested["compute"]) + (s.costs["host"] - s.tested["host"])
    return [max(w - float(x), 0.0) for w, x in zip(work, stretch, strict=True)]


def shared_saving(
    wall: dict[int, float],
    cpu: dict[int, float],
    changed: list[int],
    like: tuple[float, float],
    *,
    node: dict[int, str | None],
    busy: frozenset[int],
) -> float:
    """One step's saving with the `changed` ranks at `like` (the unchanged ranks' median work, wall-clock and CPU),
    where on each busy node every rank's work is then stretched less, by the share of the node's stretched work that
    the CPU work taken off is, and no less than its CPU work. At most the CPU work taken off: the step's CPU-bound part
    cannot shrink by more than the work removed from it, whatever else the node runs (the demand of processes
    outside the job is unknown, and the share taken off is only the job's)."""
    like_wall, like_cpu = like
    new = {r: (like_wall if r in changed else w) for r, w in wall.items()}
    nodes: dict[str, list[int]] = {}
    for r in wall:
        where = node.get(r)
        if r in busy and where is not None:
            nodes.setdefault(where, []).append(r)
    taken_off = 0.0
    for mates in nodes.values():
        demand = sum(wall[r] for r in mates)
        taken = sum(max(cpu[r] - like_cpu, 0.0) for r in mates if r in changed)
        if demand <= 0 or taken <= 0:
            continue
        taken_off += taken
        scale = (demand - taken) / demand
        for r in mates:
            floor = like_cpu if r in changed else cpu[r]
            new[r] = max(new[r] * scale, min(floor, new[r]))
    return min(max(wall.values()) - max(new.values()), taken_off)


__all__ = ["BUSY_DILATION", "busy_ranks", "cpu_work", "dilation", "shared_saving"]
