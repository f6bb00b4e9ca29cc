"""Who waits for whom, from the ranks' communication calls matched with each other. Pure.

- **Collectives** are matched within their process group: the k-th call of an op in a step on one member is the
  k-th on every other member. All members leave a collective together, so the member whose call was shortest
  arrived last, and every other member waited the difference for it. (Durations, not start times, are compared:
  the ranks' clocks may disagree by more than the waits.) A call whose group the trace does not record (gloo's
  work items) is matched among the rank's data-parallel peers: the ranks of its stage and tensor-parallel
  position, every rank in a job without a layout (not in a job with tensor parallelism, where it could be either
  group's). Only a (group, op, step) that every member issued equally often is matched, and a SendRecv kernel
  without args (either direction) is not.
- **Sends and receives** are paired: the k-th send from a to b in a step with the k-th receive on b from a. A
  receive waits for its sender; its wait is its duration beyond the least the same pair's receives took (the
  transfer). The peer is the trace's where recorded ("Src Rank"/"Dst Rank"); otherwise the neighbouring stage of
  the same replica: the only one (a first or last stage) or the one in the call's direction (CommCalls.toward).
  A receive with no matching send is not counted.

Only direct waits are told. Chains are not followed: in a pipeline the stages wait for each other's sends every
step (the schedule's own dependency), so a chain of largest waits loops whether or not a rank is slow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_contract.report import RankReport, RankWaits, SlowRank, Waiter, WaitFor

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
P2P = ("send", "recv")
UNMATCHED = ("sendrecv", "unknown")
"""calls that cannot be matched: a SendRecv kernel with no args does either, an unnamed op is no known call"""
MAX_WAITS_FOR = 3
MAX_WAITERS = 8

GroupKey = tuple[str, tuple[int, ...]]
"""a process group: its label and members ('' and the rank's (stage, TP position) for calls of no recorded group)"""


@dataclass
class _Columns:
    """Every rank's calls in one set of columns (a call per row, each rank's in the order it issued them)."""

    rank: list[I64] = field(default_factory=list)
    op: list[I64] = field(default_factory=list)
    group: list[I64] = field(default_factory=list)
    other: list[I64] = field(default_factory=list)
    step: list[I64] = field(default_factory=list)
    start: list[F64] = field(default_factory=list)
    dur: list[F64] = field(default_factory=list)
    ops: dict[str, int] = field(default_factory=dict)
    groups: dict[GroupKey, int] = field(default_factory=dict)

    def op_id(self, name: str) -> int:
        return self.ops.setdefault(name, len(self.ops))

    def group_id(self, key: GroupKey) -> int:
        return self.groups.setdefault(key, len(self.groups))


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


def _other_ends(peer: I64, toward: I64, near: dict[int, int]) -> I64:
    """Each call's other end: its recorded peer, else the only neighbour (a first or last stage), else the
    neighbour in its direction; -1 where none is known."""
    if len(near) == 1:
        fallback = np.full(peer.size, next(iter(near.values())), dtype=np.int64)
    else:
        fallback = np.where(toward == -1, near.get(-1, -1), np.where(toward == 1, near.get(1, -1), -1))
    return np.where(peer >= 0, peer, fallback).astype(np.int64)


def _family(rank: int, layout: Layout | None) -> tuple[int, ...]:
    if layout is None:
        return (0, 0)
    return (layout.stage.get(rank, 0), layout.tp_pos.get(rank, 0))


def _columns(ranks: list[RankReport], layout: Layout | None) -> _Columns:
    out = _Columns()
    neighbours = _neighbours(layout)
    for r in ranks:
        c = r.comm_calls
        if c is None or not c.dur_us:
            continue
        n = len(c.dur_us)
        members = {f"{g.name}:{g.desc}" if g.desc else g.name: tuple(g.ranks) for g in r.process_groups if g.ranks}
        op_ids = np.asarray([out.op_id(o) for o in c.ops] or [0], dtype=np.int64)
        group_ids = np.asarray(
            [out.group_id((label, members.get(label, ()))) for label in c.groups]
            + [out.group_id(("", _family(r.rank, layout)))],
            dtype=np.int64,
        )
        op_index = np.clip(np.asarray(c.op_index[:n], dtype=np.int64), 0, op_ids.size - 1)
        group_index = np.asarray(c.group_index[:n], dtype=np.int64)
        toward = np.asarray(c.toward if len(c.toward) == n else [0] * n, dtype=np.int64)
        out.rank.append(np.full(n, r.rank, dtype=np.int64))
        out.op.append(op_ids[op_index])
        out.group.append(group_ids[np.where((group_index >= 0) & (group_index < len(c.groups)), group_index, -1)])
        out.other.append(_other_ends(np.asarray(c.peer[:n], dtype=np.int64), toward, neighbours.get(r.rank, {})))
        out.step.append(np.asarray(c.step[:n], dtype=np.int64))
        dur = np.asarray(c.dur_us[:n], dtype=np.float64)
        # without start times (a summary from before they were kept) the calls are taken one after the other
        out.start.append(np.asarray(c.start_us, dtype=np.float64) if len(c.start_us) == n else np.cumsum(dur) - dur)
        out.dur.append(dur)
    return out


def _segments(*keys: I64) -> I64:
    """Rows sorted by `keys` (the first the most significant, ties in row order) -> the segment id of each row in
    that order, and the order itself, as one array pair."""
    order = np.lexsort((np.arange(keys[0].size), *reversed(keys)))
    changed = np.zeros(order.size, dtype=bool)
    if order.size:
        changed[0] = True
        for k in keys:
            ks = k[order]
            changed[1:] |= ks[1:] != ks[:-1]
    return np.stack([order, np.cumsum(changed) - 1])


def _places(sorted_keys: I64) -> I64:
    """For keys in sorted order: each row's place in its run of equal keys (0, 1, ...)."""
    n = sorted_keys.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))
    out: I64 = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    return out


def _ordinals(*keys: I64) -> I64:
    """Each row's place among the rows of equal `keys` (0, 1, ...), in row order."""
    order, seg = _segments(*keys)
    out = np.empty(order.size, dtype=np.int64)
    out[order] = _places(seg)
    return out


@dataclass(frozen=True)
class _Rows:
    rank: I64
    op: I64
    group: I64
    other: I64
    step: I64
    start: F64
    dur: F64

    def take(self, mask: npt.NDArray[np.bool_]) -> _Rows:
        return _Rows(
            self.rank[mask],
            self.op[mask],
            self.group[mask],
            self.other[mask],
            self.step[mask],
            self.start[mask],
            self.dur[mask],
        )


@dataclass
class _Waits:
    waiter: list[I64] = field(default_factory=list)
    target: list[I64] = field(default_factory=list)
    start: list[F64] = field(default_factory=list)
    us: list[F64] = field(default_factory=list)
    via: list[I64] = field(default_factory=list)


@dataclass(frozen=True)
class _Matched:
    """The matched collectives: the calls in segment order (`order`: row indices, `seg`: each one's collective),
    and per collective its least duration and the rank that made it (the last to arrive)."""

    order: I64
    seg: I64
    least: F64
    last: I64


def _matched(rows: _Rows) -> _Matched:
    """Each call's collective (the k-th call of its group and op in a step on every member) and who arrived last."""
    rank, op, group, step, dur = rows.rank, rows.op, rows.group, rows.step, rows.dur
    place = _ordinals(rank, group, op, step)
    order, seg = _segments(group, op, step, place)
    size = np.bincount(seg)
    by_dur = np.lexsort((dur[order], seg))  # within each segment the shortest call first
    first = np.flatnonzero(_places(seg[by_dur]) == 0)
    least = np.empty(size.size)
    last = np.empty(size.size, dtype=np.int64)
    least[seg[by_dur][first]] = dur[order][by_dur][first]
    last[seg[by_dur][first]] = rank[order][by_dur][first]
    return _Matched(order, seg, least, last)


def _collective_waits(c: _Columns, rows: _Rows, out: _Waits) -> None:
    """In each matched collective the member with the shortest call arrived last; the others waited the rest."""
    rank, op, group, dur = rows.rank, rows.op, rows.group, rows.dur
    if rank.size == 0:
        return
    m = _matched(rows)
    order, seg, least, last = m.order, m.seg, m.least, m.last
    size = np.bincount(seg)
    wait = dur[order] - least[seg]
    keep = (size[seg] >= 2) & (rank[order] != last[seg]) & (wait > 0)
    out.waiter.append(rank[order][keep])
    out.target.append(last[seg][keep])
    out.start.append(rows.start[order][keep])
    out.us.append(wait[keep])
    out.via.append((group[order] * len(c.ops) + op[order])[keep])


def _receive_waits(c: _Columns, rows: _Rows, out: _Waits) -> None:
    """Each receive paired with its sender's send waits its duration beyond the least that pair's receives took."""
    rank, op, other, step, dur = rows.rank, rows.op, rows.other, rows.step, rows.dur
    if rank.size == 0:
        return
    send = op == c.ops.get("send", -1)
    src, dst = np.where(send, rank, other), np.where(send, other, rank)
    place = _ordinals(rank, op, other, step)
    ids = _codes(src, dst, step, place)
    recv = ~send
    paired = recv & np.isin(ids, ids[send])
    if not paired.any():
        return
    pair = src * (int(max(src.max(), dst.max())) + 1) + dst
    pairs, floors = _least_by(pair[paired], dur[paired])
    wait = dur[paired] - floors[np.searchsorted(pairs, pair[paired])]
    keep = wait > 0
    out.waiter.append(dst[paired][keep])
    out.target.append(src[paired][keep])
    out.start.append(rows.start[paired][keep])
    out.us.append(wait[keep])
    out.via.append(np.full(int(keep.sum()), -1, dtype=np.int64))


def _codes(*columns: I64) -> I64:
    """One int64 per row that is equal exactly where every column is (each column numbered densely first, the
    rows themselves where the numbers would not fit one int64)."""
    code = np.zeros(columns[0].size, dtype=np.int64)
    span = 1
    for col in columns:
        values, dense = np.unique(col, return_inverse=True)
        span *= max(1, values.size)
        if span >= 1 << 62:
            _, rows = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
            out: I64 = rows.reshape(-1).astype(np.int64)
            return out
        code = code * values.size + dense.reshape(-1)
    return code


def _same_count(rows: _Rows) -> npt.NDArray[np.bool_]:
    """Rows of the (group, op, step)s that every member issued equally often: the k-th call is then one call."""
    if rows.rank.size == 0:
        return np.zeros(0, dtype=bool)
    per_rank, of_row = np.unique(_codes(rows.rank, rows.group, rows.op, rows.step), return_inverse=True)
    counts = np.bincount(of_row.reshape(-1))
    key = _codes(rows.group, rows.op, rows.step)
    key_of_count = np.empty(per_rank.size, dtype=np.int64)
    key_of_count[of_row.reshape(-1)] = key
    keys, key_index = np.unique(key_of_count, return_inverse=True)
    least = np.full(keys.size, np.iinfo(np.int64).max)
    most = np.zeros(keys.size, dtype=np.int64)
    np.minimum.at(least, key_index, counts)
    np.maximum.at(most, key_index, counts)
    agree: npt.NDArray[np.bool_] = (least == most)[np.searchsorted(keys, key)]
    return agree


def _least_by(keys: I64, values: F64) -> tuple[I64, F64]:
    order = np.lexsort((values, keys))
    first = _places(keys[order]) == 0
    return keys[order][first], values[order][first]


def _via_texts(c: _Columns) -> dict[int, str]:
    """via code (group * ops + op; -1: a receive) -> how the report names it."""
    out = {-1: "recv from it"}
    for (label, _), g in c.groups.items():
        for op, o in c.ops.items():
            out[g * len(c.ops) + o] = f"{op} in {label}" if label else f"{op} with its data-parallel peers"
    return out


def _steps_per_rank(rank: I64, step: I64) -> dict[int, int]:
    """rank -> how many recorded steps its calls fall in."""
    _, first = np.unique(_codes(rank, step), return_index=True)
    ranks, counts = np.unique(rank[first], return_counts=True)
    return {int(r): int(n) for r, n in zip(ranks, counts, strict=True)}


def _union_by(group: I64, start: F64, length: F64, groups: int) -> F64:
    """Per group (0 .. groups-1), the wall-clock length of the union of its intervals [start, start + length): waits
    in calls that run at once count once. In start order each interval adds what reaches beyond every earlier one."""
    if group.size == 0:
        return np.zeros(groups)
    lo = float(start.min())
    span = float((start + length).max()) - lo + 1.0
    shifted = start - lo + group * span  # each group's intervals apart from the others'
    order = np.argsort(shifted, kind="stable")
    begin, reach = shifted[order], np.maximum.accumulate(shifted[order] + length[order])
    before = np.concatenate(([-np.inf], reach[:-1]))
    added = np.maximum(0.0, reach - np.maximum(begin, before))
    out: F64 = np.bincount(group[order], weights=added, minlength=groups).astype(float)
    return out


def _first_of_each(sorted_keys: I64, most: int) -> npt.NDArray[np.bool_]:
    """For keys in sorted order: True on the first `most` rows of each run of equal keys."""
    first: npt.NDArray[np.bool_] = _places(sorted_keys) < most
    return first


@dataclass(frozen=True)
class CallTable:
    """Every rank's calls in columns, built once per job and read by both matched_waits and last_arrivals: the
    columns (op and group numbering), every call, and the collectives that can be matched."""

    columns: _Columns
    rows: _Rows
    collective: _Rows


def call_table(ranks: list[RankReport], layout: Layout | None) -> CallTable | None:
    """Every rank's calls (see CallTable), None without calls."""
    c = _columns(ranks, layout)
    if not c.rank:
        return None
    join = np.concatenate
    rows = _Rows(join(c.rank), join(c.op), join(c.group), join(c.other), join(c.step), join(c.start), join(c.dur))
    p2p = np.isin(rows.op, [c.ops[o] for o in P2P if o in c.ops])
    unmatched = np.isin(rows.op, [c.ops[o] for o in UNMATCHED if o in c.ops])
    if layout is not None and layout.tp > 1:  # ungrouped calls could be the TP groups' or the replicas'
        unmatched |= np.isin(rows.group, [g for (label, _), g in c.groups.items() if not label])
    collective = rows.take(~p2p & ~unmatched)
    return CallTable(c, rows, collective.take(_same_count(collective)))


def matched_waits(ranks: list[RankReport], layout: Layout | None) -> list[RankWaits]:
    """Each rank that waits in matched calls: for whom, per step (its recorded steps with calls), most first."""
    return waits_of(call_table(ranks, layout))


def waits_of(table: CallTable | None) -> list[RankWaits]:
    """matched_waits over calls already in columns."""
    if table is None:
        return []
    c, rows = table.columns, table.rows
    waits = _Waits()
    _collective_waits(c, table.collective, waits)
    p2p = np.isin(rows.op, [c.ops[o] for o in P2P if o in c.ops])
    _receive_waits(c, rows.take(p2p & (rows.other >= 0) & (rows.other != rows.rank)), waits)
    return _per_rank(c, waits, _steps_per_rank(rows.rank, rows.step))


@dataclass(frozen=True)
class Arrival:
    """One matched collective: its step, the ranks that issued it, and the one that arrived last."""

    step: int
    members: tuple[int, ...]
    last: int


def last_arrivals(ranks: list[RankReport], layout: Layout | None) -> list[Arrival]:
    """Every matched collective of two members or more (as matched_waits matches them), with the member that arrived
    last: the one whose call was shortest."""
    return arrivals_of(call_table(ranks, layout))


def arrivals_of(table: CallTable | None) -> list[Arrival]:
    """last_arrivals over calls already in columns."""
    if table is None or table.collective.rank.size == 0:
        return []
    collective = table.collective
    m = _matched(collective)
    rank, step = collective.rank[m.order], collective.step[m.order]
    bounds = np.flatnonzero(np.diff(m.seg)) + 1
    out = []
    for members, steps, seg in zip(np.split(rank, bounds), np.split(step, bounds), np.split(m.seg, bounds),
                                   strict=True):  # fmt: skip
        if members.size >= 2:
            out.append(Arrival(int(steps[0]), tuple(sorted(members.tolist())), int(m.last[seg[0]])))
    return out


def _per_rank(c: _Columns, w: _Waits, steps: dict[int, int]) -> list[RankWaits]:
    if not w.waiter:
        return []
    waiter, target = np.concatenate(w.waiter), np.concatenate(w.target)
    start, us, via = np.concatenate(w.start), np.concatenate(w.us), np.concatenate(w.via)
    if waiter.size == 0:
        return []
    _, first_row, edge_of = np.unique(_codes(waiter, target), return_index=True, return_inverse=True)
    edge_of = edge_of.reshape(-1)
    a, b = waiter[first_row], target[first_row]  # each edge: who waits, for whom
    ranks, rank_of = np.unique(a, return_inverse=True)
    per = np.asarray([max(1, steps.get(int(r), 1)) for r in ranks], dtype=np.float64)
    per_step = np.round(_union_by(edge_of, start, us, first_row.size) / per[rank_of], 1)
    waited = np.round(_union_by(rank_of[edge_of], start, us, ranks.size) / per, 1)
    calls = np.bincount(edge_of)
    # each edge's calls named by the via they were most often in
    span = int(via.max()) + 2
    pairs, pair_calls = np.unique(edge_of.astype(np.int64) * span + (via + 1), return_counts=True)
    pair_edge, pair_via = pairs // span, pairs % span - 1
    best = np.lexsort((pair_via, -pair_calls, pair_edge))
    top_via = pair_via[best][_first_of_each(pair_edge[best], 1)]
    order = np.lexsort((b, -per_step, a))
    kept = order[_first_of_each(a[order], MAX_WAITS_FOR)]
    kept = kept[per_step[kept] > 0]  # waits that round to nothing per step are not told
    texts = _via_texts(c)
    out: dict[int, RankWaits] = {}
    for e in kept.tolist():
        rank = int(a[e])
        if rank not in out:
            out[rank] = RankWaits(rank=rank, waited_us_per_step=float(waited[rank_of[e]]))
        out[rank].waits_for.append(
            WaitFor(rank=int(b[e]), us_per_step=float(per_step[e]), via=texts[int(top_via[e])], calls=int(calls[e]))
        )
    return [out[r] for r in sorted(out)]


def waiters_of(waits: Sequence[RankWaits], rank: int) -> list[Waiter]:
    """The ranks that wait for `rank` directly, with that wait, most first."""
    out = [
        Waiter(rank=w.rank, us_per_step=f.us_per_step, via=f.via) for w in waits for f in w.waits_for if f.rank == rank
    ]
    out.sort(key=lambda x: (-x.us_per_step, x.rank))
    return out[:MAX_WAITERS]


def with_waiters(slow: list[SlowRank], waits: list[RankWaits], skip: frozenset[object]) -> list[SlowRank]:
    """The slow ranks (those of a cause in `skip` left as they are) with the ranks that wait for them."""
    return [s if s.cause in skip else s.model_copy(update={"waiters": waiters_of(waits, s.rank)}) for s in slow]
