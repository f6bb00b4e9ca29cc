"""The job's distributions from the ranks table: each compared number over the analysed ranks, and each node's
median step times, exact (the table holds every rank's row, a few hundred bytes each). Pure."""

from __future__ import annotations

import math
from collections import defaultdict

from stepscope_analyzer.ranks.facts import FactsTable
from stepscope_contract.report import Distributions, NodeSpread, Quantiles

__all__ = ["MAX_NODES", "distributions"]

MAX_NODES = 32
COLUMNS = (
    "step_median_us",
    "step_p90_us",
    "step_max_us",
    "compute_time",
    "communication_time",
    "collective_wait_time",
    "host_time",
    "idle_time",
    "gpu_utilization",
    "cpu_utilization",
)


def _at(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _quantiles(column: str, values: list[float]) -> Quantiles | None:
    ordered = sorted(v for v in values if not math.isnan(v))
    if not ordered:
        return None
    return Quantiles(
        column=column, count=len(ordered), min=ordered[0], p10=_at(ordered, 0.1), p50=_at(ordered, 0.5),
        p90=_at(ordered, 0.9), p99=_at(ordered, 0.99), max=ordered[-1],
    )  # fmt: skip


def _nodes(table: FactsTable, rows: list[int]) -> tuple[list[NodeSpread], int]:
    steps: dict[str, list[float]] = defaultdict(list)
    medians = table.floats["step_median_us"]
    for i in rows:
        node = table.string("node", i)
        if node is not None:
            steps[node].append(medians[i])
    spreads = []
    for node, values in steps.items():
        values.sort()
        spreads.append(NodeSpread(node=node, ranks=len(values), min_us=values[0], median_us=_at(values, 0.5),
                                  max_us=values[-1]))  # fmt: skip
    spreads.sort(key=lambda s: (-s.max_us, s.node))
    return spreads[:MAX_NODES], len(spreads)


def distributions(table: FactsTable, compared: int) -> Distributions:
    """The table's distributions; `compared`: how many analysed ranks the diagnosis compared in full."""
    rows = table.ok_rows()
    columns = [_quantiles(c, [table.floats[c][i] for i in rows]) for c in COLUMNS]
    nodes, total = _nodes(table, rows)
    return Distributions(
        ranks=len(table), analysed=len(rows), compared_in_full=compared, columns=[c for c in columns if c],
        nodes=nodes, nodes_total=total,
    )  # fmt: skip
