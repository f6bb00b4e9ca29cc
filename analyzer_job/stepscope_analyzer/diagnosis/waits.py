"""Who waits for whom, from the ranks' communication calls matched with each other. Pure.

- **Collectives** are matched within their process group: the k-th call of an op in a step on one member is the
  k-th on every other member. All members leave a collective together, so the member whose call was shortest
  arrived last, and every other member waited the difference for it. (Durations, not start times, are compared:
  the ranks' clocks may disagree by more than the waits.) A call whose group the trace does not record (gloo's
  work items) is matched among the rank's data-parallel peers: the ranks of its stage and tensor-parallel
  position, every rank in a job without a layout.
- **Sends and receives** are paired: the k-th send from a to b in a step with the k-th receive on b from a. A
  receive waits for its sender; its wait is its duration beyond the least the same pair's receives took (the
  transfer). The peer is the trace's where recorded ("Src Rank"/"Dst Rank"); otherwise the neighbouring stage of
  the same replica: the only one (a first or last stage) or the one in the call's direction (CommCalls.toward).
  A receive with no matching send is not counted.

Only direct waits are told. Chains are not followed: in a pipeline the stages wait for each other's sends every
step (the schedule's own dependency), so a chain of largest waits loops whether or not a rank is slow.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_contract.report import CommCalls, RankReport, RankWaits, SlowRank, Waiter, WaitFor

P2P = ("send", "recv")
MAX_WAITS_FOR = 3
MAX_WAITERS = 8


@dataclass
class _Edge:
    us: float = 0.0
    calls: int = 0
    via: Counter[str] = field(default_factory=Counter)


GroupKey = tuple[str, tuple[int, ...]]
"""a process group: its label and members ('' and the rank's (stage, TP position) for calls of no recorded group)"""
CallKey = tuple[GroupKey, str, int, int]
"""a collective call: its group, op, step and place among the group's calls of that op in the step"""


@dataclass
class _Calls:
    collectives: dict[CallKey, list[tuple[int, float]]] = field(default_factory=lambda: defaultdict(list))
    recvs: dict[tuple[int, int, int, int], float] = field(default_factory=dict)
    sends: set[tuple[int, int, int, int]] = field(default_factory=set)
    steps: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))


def _neighbours(layout: Layout | None) -> dict[int, dict[int, int]]:
    """rank -> {-1: the previous stage's rank, +1: the next stage's} in its replica and tensor-parallel position."""
    if layout is None or layout.stages < 2:
        return {}
    at = {(layout.stage[r], layout.replica.get(r, 0), layout.tp_pos.get(r, 0)): r for r in layout.stage}
    out: dict[int, dict[int, int]] = {}
    for r, s in layout.stage.items():
        key = (layout.replica.get(r, 0), layout.tp_pos.get(r, 0))
        out[r] = {d: at[(s + d, *key)] for d in (-1, 1) if (s + d, *key) in at}
    return out


def _other_end(peer: int, toward: int, near: dict[int, int]) -> int:
    """The call's other end: its recorded peer, else the only neighbour (a first or last stage), else the neighbour
    in its direction."""
    if peer >= 0:
        return peer
    if len(near) == 1:
        return next(iter(near.values()))
    return near.get(toward, -1)


def _family(rank: int, layout: Layout | None) -> tuple[int, int]:
    if layout is None:
        return (0, 0)
    return (layout.stage.get(rank, 0), layout.tp_pos.get(rank, 0))


def _group_keys(r: RankReport) -> dict[int, GroupKey]:
    """The rank's group indices -> a key naming the group's members where the rank's process groups list them
    (disjoint groups may share a name)."""
    c = r.comm_calls
    assert c is not None
    members = {f"{g.name}:{g.desc}" if g.desc else g.name: tuple(g.ranks) for g in r.process_groups if g.ranks}
    return {i: (label, members.get(label, ())) for i, label in enumerate(c.groups)}


def _collect(ranks: list[RankReport], layout: Layout | None) -> _Calls:
    out = _Calls()
    neighbours = _neighbours(layout)
    for r in ranks:
        c: CommCalls | None = r.comm_calls
        if c is None:
            continue
        groups = _group_keys(r)
        seen: Counter[Hashable] = Counter()
        toward = c.toward if len(c.toward) == len(c.dur_us) else [0] * len(c.dur_us)
        calls = zip(c.op_index, c.group_index, c.peer, toward, c.step, c.dur_us, strict=False)
        for op_i, g, peer, way, step, dur in calls:
            op = c.ops[op_i] if 0 <= op_i < len(c.ops) else "unknown"
            out.steps[r.rank].add(step)
            if op in P2P:
                other = _other_end(peer, way, neighbours.get(r.rank, {}))
                if other < 0 or other == r.rank:
                    continue
                n = seen[(op, other, step)]
                seen[(op, other, step)] += 1
                if op == "send":
                    out.sends.add((r.rank, other, step, n))
                else:
                    out.recvs[(other, r.rank, step, n)] = dur
                continue
            group: GroupKey = groups.get(g, ("", ())) if g >= 0 else ("", _family(r.rank, layout))
            n = seen[(group, op, step)]
            seen[(group, op, step)] += 1
            out.collectives[(group, op, step, n)].append((r.rank, dur))
    return out


def _via(group: GroupKey, op: str) -> str:
    label = group[0]
    return f"{op} in {label}" if label else f"{op} with its data-parallel peers"


def _edges(calls: _Calls) -> dict[int, dict[int, _Edge]]:
    edges: dict[int, dict[int, _Edge]] = defaultdict(lambda: defaultdict(_Edge))
    for (group, op, _, _), entries in calls.collectives.items():
        if len(entries) < 2:
            continue
        last, least = min(entries, key=lambda e: e[1])
        for rank, dur in entries:
            if rank != last and dur > least:
                e = edges[rank][last]
                e.us += dur - least
                e.calls += 1
                e.via[_via(group, op)] += 1
    floors: dict[tuple[int, int], float] = {}
    for (src, dst, _, _), dur in calls.recvs.items():
        floors[(src, dst)] = min(dur, floors.get((src, dst), dur))
    for key, dur in calls.recvs.items():
        src, dst = key[0], key[1]
        if key in calls.sends and dur > floors[(src, dst)]:
            e = edges[dst][src]
            e.us += dur - floors[(src, dst)]
            e.calls += 1
            e.via["recv from it"] += 1
    return edges


def matched_waits(ranks: list[RankReport], layout: Layout | None) -> list[RankWaits]:
    """Each rank that waits in matched calls: for whom, per step, and at the end of whose chain (by rank)."""
    calls = _collect(ranks, layout)
    edges = _edges(calls)
    per_step: dict[int, list[WaitFor]] = {}
    for rank, targets in edges.items():
        steps = max(1, len(calls.steps.get(rank, ())))
        waits = [
            WaitFor(rank=t, us_per_step=round(e.us / steps, 1), via=e.via.most_common(1)[0][0], calls=e.calls)
            for t, e in targets.items()
            if e.us > 0
        ]
        waits.sort(key=lambda w: (-w.us_per_step, w.rank))
        if waits:
            per_step[rank] = waits
    return [
        RankWaits(
            rank=rank, waited_us_per_step=round(sum(w.us_per_step for w in waits), 1), waits_for=waits[:MAX_WAITS_FOR]
        )
        for rank, waits in sorted(per_step.items())
    ]


def waiters_of(waits: list[RankWaits], rank: int) -> list[Waiter]:
    """The ranks that wait for `rank` directly, with that wait, most first."""
    out = [
        Waiter(rank=w.rank, us_per_step=f.us_per_step, via=f.via) for w in waits for f in w.waits_for if f.rank == rank
    ]
    out.sort(key=lambda x: (-x.us_per_step, x.rank))
    return out[:MAX_WAITERS]


def with_waiters(slow: list[SlowRank], waits: list[RankWaits], skip: frozenset[object]) -> list[SlowRank]:
    """The slow ranks (those of a cause in `skip` left as they are) with the ranks that wait for them."""
    return [s if s.cause in skip else s.model_copy(update={"waiters": waiters_of(waits, s.rank)}) for s in slow]
