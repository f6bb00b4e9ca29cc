"""Traces of different jobs in one folder: which ranks belong together. Pure.

Ranks of one job share the world size and the process groups of the whole world their traces record
(distributedInfo), agree on every smaller group they list (each rank lists only the groups it belongs to: a pipeline
rank its stage's data-parallel group and its replica's pipeline group; one group name means the same members on
every rank that lists it, and a rank belongs to every group it lists), and were recorded at the same time (their
recorded steps overlap). Ranks are grouped by (world size, whole-world groups, time cluster); a new time cluster
starts where a rank's recording begins after every earlier one ended, by more than clock skew between nodes could
explain (TIME_GAP_S, or a typical recording window if that is longer). The largest group is the job that is
diagnosed; the others are named with the reason. A rank whose trace says nothing of this goes with the largest
group.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import RankReport

TIME_GAP_S = 1.0


@dataclass
class JobGroups:
    foreign: dict[int, str] = field(default_factory=dict)
    """rank -> why it is not from the diagnosed job"""
    note: str | None = None


def _time_clusters(ranks: list[RankReport]) -> dict[int, int]:
    timed = sorted(
        (r for r in ranks if r.captured_from_unix_s is not None and r.captured_to_unix_s is not None),
        key=lambda r: r.captured_from_unix_s or 0.0,
    )
    if not timed:
        return {}
    spans = sorted((r.captured_to_unix_s or 0.0) - (r.captured_from_unix_s or 0.0) for r in timed)
    gap = max(TIME_GAP_S, spans[len(spans) // 2])
    out: dict[int, int] = {}
    cluster, end = 0, timed[0].captured_to_unix_s or 0.0
    for r in timed:
        start = r.captured_from_unix_s or 0.0
        if start > end + gap:
            cluster += 1
        end = max(end, r.captured_to_unix_s or 0.0)
        out[r.rank] = cluster
    return out


def _why(mine: tuple[object, ...], main: tuple[object, ...], hours: float | None) -> str:
    if mine[0] != main[0]:
        return f"world size {mine[0]}, not {main[0]}"
    if mine[1] != main[1]:
        return f"process groups {mine[1]}, not {main[1]}"
    if hours is None:
        return "recorded at another time"
    if hours >= 1:
        return f"recorded {hours:.1f} h apart"
    return f"recorded {hours * 60:.0f} min apart" if hours >= 1 / 30 else f"recorded {hours * 3600:.0f} s apart"


def _group_conflicts(ranks: list[RankReport]) -> dict[int, str]:
    """rank -> why its smaller process groups disagree with the other ranks' (most ranks' view of a group wins)."""
    views: dict[str, Counter[tuple[str, tuple[int, ...]]]] = defaultdict(Counter)
    for r in ranks:
        for g in r.process_groups:
            if g.ranks:
                views[g.name][(g.desc, tuple(g.ranks))] += 1
    out: dict[int, str] = {}
    for r in ranks:
        for g in r.process_groups:
            if not g.ranks:
                continue
            desc, members = views[g.name].most_common(1)[0][0]
            if (g.desc, tuple(g.ranks)) != (desc, members):
                out[r.rank] = f"process group {g.name} ({g.desc}) holds ranks {format_rank_set(g.ranks)}, not " \
                    f"{format_rank_set(list(members))}"  # fmt: skip
                break
            if r.rank not in g.ranks:
                out[r.rank] = f"process group {g.name} ({g.desc}) does not hold the rank that lists it"
                break
    return out


def _note(foreign: dict[int, str], main_ranks: list[int]) -> str:
    left = "rank " + format_rank_set(sorted(foreign)) + (" is" if len(foreign) == 1 else " are")
    return f"traces of different jobs: {left} not from the job of ranks {format_rank_set(main_ranks)}, left out"


def split_jobs(ranks: list[RankReport]) -> JobGroups:
    """Group analysed ranks by job; everything outside the largest group is `foreign`."""
    if len(ranks) < 2:
        return JobGroups()
    clusters = _time_clusters(ranks)
    keys = {r.rank: (r.world_size, r.job_fingerprint, clusters.get(r.rank)) for r in ranks}
    known = Counter(k for k in keys.values() if k != (None, None, None))
    if not known:
        return JobGroups()
    main, _ = max(known.items(), key=lambda kv: (kv[1], -min(r for r, k in keys.items() if k == kv[0])))
    start = {r.rank: r.captured_from_unix_s for r in ranks}
    main_start = next((start[r] for r, k in keys.items() if k == main and start[r] is not None), None)
    foreign: dict[int, str] = {}
    for rank, key in keys.items():
        if key in (main, (None, None, None)):
            continue
        s = start[rank]
        hours = abs(s - main_start) / 3600.0 if s is not None and main_start is not None else None
        foreign[rank] = _why(key, main, hours)
    foreign.update(_group_conflicts([r for r in ranks if r.rank not in foreign]))
    if not foreign:
        return JobGroups()
    main_ranks = sorted(r for r in keys if r not in foreign)
    return JobGroups(foreign=foreign, note=_note(foreign, main_ranks))
