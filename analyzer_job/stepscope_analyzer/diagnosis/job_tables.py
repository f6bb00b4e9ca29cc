"""Cross-rank tables: the top bottlenecks and the communication summary. Pure.

Bottlenecks are a job's own costs, not time spent waiting for other ranks: a collective's bottleneck ratio is its
least over the ranks (the last rank to arrive does not wait, so its time in the collective is the transfer),
and the wait is reported as wait (collective_wait_time, the communication table's wait_us)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stepscope_contract.report import Bottleneck, Collective, RankReport

NOT_FUNCTIONS = frozenset({"user_annotation", "host_gap"})
"""user regions wrap other work (collectives included) and host gaps are places, not functions: evidence only"""


@dataclass
class _Acc:
    count: int = 0
    total_us: float = 0.0
    ratios: list[float] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)


def top_bottlenecks(ranks: list[RankReport], limit: int) -> list[Bottleneck]:
    """Functions, kernels and ops by bottleneck ratio, averaged over the analysed ranks (absent counts 0);
    collectives by their least ratio over the ranks that ran them (their time without waiting)."""
    acc: dict[tuple[str, str], _Acc] = {}
    for r in ranks:
        for b in r.top_functions:
            if b.category in NOT_FUNCTIONS:
                continue
            a = acc.setdefault((b.category, b.name), _Acc())
            a.count += b.count
            a.total_us += b.total_us
            a.ratios.append(b.bottleneck_ratio)
            a.ranks.append(r.rank)
    n = max(len(ranks), 1)
    out = [
        Bottleneck(
            name=name,
            category=category,
            count=a.count,
            total_us=a.total_us,
            mean_us=a.total_us / a.count if a.count else 0.0,
            bottleneck_ratio=min(a.ratios) if category == "communication" else sum(a.ratios) / n,
            ranks=sorted(a.ranks),
        )
        for (category, name), a in acc.items()
    ]
    out.sort(key=lambda b: (-b.bottleneck_ratio, -b.total_us, b.name))
    return out[:limit]


def communication_summary(ranks: list[RankReport], limit: int) -> list[Collective]:
    """Collectives per type and process group; times (wait included) are means per rank that ran them."""
    acc: dict[tuple[str, str | None], tuple[int, float, float, float, int]] = {}
    for r in ranks:
        for c in r.collectives:
            count, total, exposed, wait, seen = acc.get((c.name, c.process_group), (0, 0.0, 0.0, 0.0, 0))
            acc[(c.name, c.process_group)] = (
                count + c.count,
                total + c.total_us,
                exposed + c.exposed_us,
                wait + c.wait_us,
                seen + 1,
            )
    out = [
        Collective(
            name=name,
            process_group=pg,
            count=round(count / seen),
            total_us=total / seen,
            exposed_us=exposed / seen,
            wait_us=wait / seen,
        )
        for (name, pg), (count, total, exposed, wait, seen) in acc.items()
    ]
    out.sort(key=lambda c: (-c.total_us, c.name))
    return out[:limit]
