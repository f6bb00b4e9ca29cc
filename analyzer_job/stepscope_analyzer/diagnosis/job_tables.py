"""Cross-rank bottlenecks and the communication summary. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from stepscope_contract.report import Bottleneck, Collective, RankReport


@dataclass
class _Acc:
    count: int = 0
    total_us: float = 0.0
    ratio_sum: float = 0.0
    ranks: list[int] = field(default_factory=list)


def top_bottlenecks(ranks: list[RankReport], limit: int) -> list[Bottleneck]:
    """Functions, kernels and ops by bottleneck ratio, averaged over the analysed ranks (absent counts 0).

    User annotations (record_function regions) are left out: they wrap other work, collectives included, so their
    un-overlapped time is not their own. They still serve as evidence of where a slow rank's time goes."""
    acc: dict[tuple[str, str], _Acc] = {}
    for r in ranks:
        for b in r.top_functions:
            if b.category == "user_annotation":
                continue
            a = acc.setdefault((b.category, b.name), _Acc())
            a.count += b.count
            a.total_us += b.total_us
            a.ratio_sum += b.bottleneck_ratio
            a.ranks.append(r.rank)
    n = max(len(ranks), 1)
    out = [
        Bottleneck(
            name=name,
            category=category,
            count=a.count,
            total_us=a.total_us,
            mean_us=a.total_us / a.count if a.count else 0.0,
            bottleneck_ratio=a.ratio_sum / n,
            ranks=sorted(a.ranks),
        )
        for (category, name), a in acc.items()
    ]
    out.sort(key=lambda b: (-b.bottleneck_ratio, -b.total_us, b.name))
    return out[:limit]


def communication_summary(ranks: list[RankReport], limit: int) -> list[Collective]:
    """Collectives per type and process group; times are means per rank that ran them."""
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
