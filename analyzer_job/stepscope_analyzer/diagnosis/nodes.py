"""Slow nodes: nodes where several slow ranks sit, or every rank of the node is slow. Pure."""

from __future__ import annotations

from collections import Counter, defaultdict

from stepscope_contract.report import SlowNode, SlowRank


def find_slow_nodes(slow: list[SlowRank], node_of: dict[int, str | None]) -> list[SlowNode]:
    ranks_on: dict[str, list[int]] = defaultdict(list)
    for rank, node in node_of.items():
        if node:
            ranks_on[node].append(rank)
    slow_on: dict[str, list[SlowRank]] = defaultdict(list)
    for s in slow:
        node = s.node or node_of.get(s.rank)
        if node:
            slow_on[node].append(s)
    out: list[SlowNode] = []
    for node, entries in slow_on.items():
        all_ranks = ranks_on.get(node, [])
        if len(entries) >= 2 or (all_ranks and len(entries) == len(all_ranks) and len(node_of) > len(all_ranks)):
            cause = Counter(e.cause for e in entries).most_common(1)[0][0]
            out.append(SlowNode(node=node, ranks=sorted(e.rank for e in entries), cause=cause))
    out.sort(key=lambda n: (-len(n.ranks), n.node))
    return out
