"""Which analysed ranks the diagnosis compares in full when there are more than it reads (pass two). Pure.

The diagnosis reads most of a compared rank's summary: its step phases per step (replay, peers, stalls), its top
kernels and functions (op types, evidence), its collectives and communication calls (wait matching, layout), its
process groups (layout), its memory and GPU samples (evidence). Those do not fit a fixed row per rank, so the ranks
table (ranks/facts.py) keeps per rank only what chooses the compared ranks and makes the job's distributions, and the
compared ranks are read again whole.

Up to FULL_COMPARE analysed ranks, every one is compared in full. Beyond that the diagnosis reads again, in full,
FULL_COMPARE ranks chosen from every rank's compact numbers (ranks/facts.py), so that any rank it could name is in it
and the ranks it compares them with stand for the whole job:
- the EXTREMES ranks at both ends of the median step time, and the ranks sharing a node with the SLOWEST slowest
  ranks (a slow node shows as several of its ranks), NODE_PEERS per node at most;
- the EXTREMES ranks at both ends of every other compared number (the time breakdown, the mean step's phases);
- the rest of the budget spread evenly over the ranks ordered by median step time (their quantiles), so the job's
  median and spread are the whole job's.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

from stepscope_analyzer.ranks.facts import FLOAT_COLUMNS, FactsTable

__all__ = ["FULL_COMPARE", "compared_rows"]

FULL_COMPARE = 512
EXTREMES = 6
SLOWEST = 8
NODE_PEERS = 16
_ORDER = "step_median_us"


def _ends(table: FactsTable, rows: list[int], column: str) -> list[int]:
    values = table.floats[column]
    usable = [i for i in rows if not math.isnan(values[i])]
    if not usable:
        return []
    ordered = sorted(usable, key=lambda i: (values[i], table.ints["rank"][i]))
    return ordered[:EXTREMES] + ordered[-EXTREMES:]


def _node_peers(table: FactsTable, rows: list[int], slowest: list[int]) -> list[int]:
    nodes = {table.string("node", i) for i in slowest} - {None}
    members: dict[str | None, list[int]] = defaultdict(list)
    for i in sorted(rows, key=lambda i: table.ints["rank"][i]):  # the same ranks whatever order the rows came in
        node = table.string("node", i)
        if node in nodes and len(members[node]) < NODE_PEERS:
            members[node].append(i)
    return [i for group in members.values() for i in group]


def compared_rows(table: FactsTable, budget: int = FULL_COMPARE) -> list[int]:
    """The rows of the analysed ranks to compare in full, in table order: all of them up to `budget`, else `budget`
    of them chosen as the module says (the quantiles first left out, then the ends of the last numbers)."""
    rows = table.ok_rows()
    if len(rows) <= budget:
        return rows
    order = table.floats[_ORDER]
    by_step = sorted(rows, key=lambda i: (order[i], table.ints["rank"][i]))
    chosen: dict[int, None] = {}  # in the order of what matters most: the budget cuts the last
    for i in [*_ends(table, rows, _ORDER), *_node_peers(table, rows, by_step[-SLOWEST:])]:
        chosen.setdefault(i)
    for column in FLOAT_COLUMNS:
        for i in _ends(table, rows, column):
            chosen.setdefault(i)
    room = max(0, budget - len(chosen))
    step = len(by_step) / max(room, 1)
    if room:
        for k in range(room):
            chosen.setdefault(by_step[min(len(by_step) - 1, int(k * step + step / 2))])
    for i in itertools.chain.from_iterable(by_step[k :: max(1, int(step))] for k in range(max(1, int(step)))):
        if len(chosen) >= budget:
            break
        chosen.setdefault(i)  # quantiles that fell on ranks chosen already: their neighbours
    return sorted(list(chosen)[:budget])
