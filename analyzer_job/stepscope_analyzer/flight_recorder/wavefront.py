"""Cross-rank analysis of Flight Recorder dumps: per process group, the ranks' collectives aligned by sequence number.

The rules are PyTorch's (torch.distributed.flight_recorder): within a process group every member issues the same
collectives in the same order, so entries with the same sequence number must match in op, sizes and dtypes, and a
collective that some members entered and others never reached is where the job stands still. Here:
- a mismatch is the first sequence number at which the members' calls differ; the ranks outside the largest
  agreeing set are its culprits (PyTorch takes the first rank's call as the reference; the majority is more robust
  when that rank is the odd one);
- the wavefront of a group is its highest entered sequence number when ranks wait inside it (not completed, in
  flight for at least `stall_s` at dump time: a dump of a running job catches collectives in flight for moments);
  members that never entered it -- or left no dump -- are missing from it, the culprits of a hang;
- process groups whose members disagree on the membership itself are a mismatch of kind `membership`.
Point-to-point ops have no group-wide sequence and are not aligned. Pure.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from stepscope_analyzer.flight_recorder.calls import (
    STALL_SECONDS,
    Call,
    dump_reason,
    group_label,
    rank_calls,
    rank_list,
)
from stepscope_analyzer.flight_recorder.dump import Dump
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import (
    CollectiveCall,
    CollectiveMismatch,
    FlightRecorderFindings,
    GroupWavefront,
    WavefrontRank,
)

# PyTorch's rules: sizes may differ across ranks for these ops (all_to_all(_v), scatter/gather roots)
_FREE_SIZES = frozenset({"all_to_all", "all_to_all_single", "all_to_allv", "all_to_all_v_single", "scatter", "gather"})
MAX_ROWS = 4096


@dataclass
class Group:
    """One process group across the dumps."""

    name: str
    desc: str
    members: list[int]
    calls: dict[int, dict[int, list[Call]]] = field(default_factory=dict)  # rank -> seq -> calls

    @property
    def label(self) -> str:
        return group_label(self.name, self.desc)


@dataclass(frozen=True)
class Signature:
    op: str
    sizes: tuple[tuple[tuple[int, ...], ...], ...]
    dtypes: tuple[str, ...]

    @classmethod
    def of(cls, calls: list[Call]) -> Signature:
        ops = "+".join(c.op for c in calls)
        free = all(c.op in _FREE_SIZES for c in calls)
        sizes = () if free else tuple(c.input_sizes for c in calls) + tuple(c.output_sizes for c in calls)
        return cls(ops, sizes, tuple(d for c in calls for d in c.dtypes))

    def differs_in(self, other: Signature) -> str:
        if self.op != other.op:
            return "op"
        return "sizes" if self.sizes != other.sizes else "dtypes"


def _world(dumps: dict[int, Dump], world_size: int | None) -> int:
    sizes = [d.stepscope.world_size for d in dumps.values() if d.stepscope and d.stepscope.world_size]
    return max([world_size or 0, *sizes, max(dumps, default=-1) + 1])


def _membership(dumps: dict[int, Dump]) -> dict[str, dict[int, tuple[int, ...]]]:
    """group name -> rank -> the members that rank's dump names."""
    out: dict[str, dict[int, tuple[int, ...]]] = defaultdict(dict)
    for rank, dump in dumps.items():
        for name, ranks in dump.group_ranks().items():
            out[name][rank] = tuple(ranks)
    return out


def _groups(
    dumps: dict[int, Dump], world_size: int | None, stall_s: float
) -> tuple[list[Group], list[CollectiveMismatch]]:
    world = _world(dumps, world_size)
    membership = _membership(dumps)
    by_group: dict[str, Group] = {}
    mismatches: list[CollectiveMismatch] = []
    for rank, dump in sorted(dumps.items()):
        for call in rank_calls(rank, dump, stall_s):
            group = by_group.get(call.group)
            if group is None:
                group = Group(call.group, call.group_desc, [])
                by_group[call.group] = group
            group.calls.setdefault(rank, {}).setdefault(call.seq, []).append(call)
    for name in membership:
        if name not in by_group:  # a group that recorded nothing here: its membership is still compared
            desc = next((text for d in dumps.values() if (text := _desc(d, name)) is not None), "")
            by_group[name] = Group(name, desc, [])
    for name, group in by_group.items():
        views = membership.get(name, {})
        if views:
            counts = Counter(views.values())
            agreed, _ = counts.most_common(1)[0]
            group.members = sorted(agreed)
            odd = sorted(r for r, v in views.items() if v != agreed)
            if odd:
                mismatches.append(_membership_mismatch(group, views, agreed, odd))
        elif group.desc in ("default_pg",) or name == "0":
            group.members = list(range(world))
        else:
            group.members = sorted(group.calls)
    return sorted(by_group.values(), key=lambda g: (g.desc != "default_pg", g.name)), mismatches


def _desc(dump: Dump, name: str) -> str | None:
    info = dump.stepscope.process_groups.get(name) if dump.stepscope is not None else None
    return info.desc if info is not None else None


def _membership_mismatch(
    group: Group, views: dict[int, tuple[int, ...]], agreed: tuple[int, ...], odd: list[int]
) -> CollectiveMismatch:
    others = sorted(r for r in views if r not in odd)
    said = "; ".join(f"rank {r} has ranks {format_rank_set(list(views[r]))}" for r in odd[:8])
    message = f"{group.label}: {said} where {rank_list(others)} have ranks {format_rank_set(list(agreed))}"
    return CollectiveMismatch(process_group=_pg(group), seq=None, kind="membership", ranks=odd, message=message)


def _pg(group: Group) -> str:
    return f"{group.name}:{group.desc}" if group.desc else group.name


def _describe(calls: list[Call], with_dtypes: bool) -> str:
    text = " + ".join(f"{c.op} {c.shape_text}" for c in calls)
    if with_dtypes:
        text += " " + "/".join(sorted({d for c in calls for d in c.dtypes}))
    return text


def _first_mismatch(group: Group) -> CollectiveMismatch | None:
    """The lowest sequence number at which the members that recorded it disagree."""
    seqs = sorted({s for per_rank in group.calls.values() for s in per_rank})
    for seq in seqs:
        here = {r: calls[seq] for r, calls in group.calls.items() if seq in calls and r in group.members}
        if len(here) < 2:
            continue
        sigs = {r: Signature.of(c) for r, c in here.items()}
        counts = Counter(sigs.values())
        if len(counts) == 1:
            continue
        # the largest agreeing set is the reference; a tie goes to the set holding the lowest rank (PyTorch's choice)
        best = max(counts.values())
        reference = next(sigs[r] for r in sorted(sigs) if counts[sigs[r]] == best)
        agreeing = sorted(r for r, s in sigs.items() if s == reference)
        odd = sorted(r for r, s in sigs.items() if s != reference)
        kind = next(sigs[r].differs_in(reference) for r in odd)
        dtypes = kind == "dtypes"
        parts = []
        for sig in sorted({sigs[r] for r in odd}, key=lambda s: min(r for r in odd if sigs[r] == s)):
            ranks = [r for r in odd if sigs[r] == sig]
            parts.append(f"{rank_list(ranks)} called {_describe(here[ranks[0]], dtypes)}")
        message = (
            f"{' and '.join(parts)} where {rank_list(agreeing)} called "
            f"{_describe(here[agreeing[0]], dtypes)}, seq {seq} of {group.label}"
        )
        return CollectiveMismatch(process_group=_pg(group), seq=seq, kind=kind, ranks=odd, message=message)
    return None


def _call_model(group: Group, calls: list[Call]) -> CollectiveCall:
    first = calls[0]
    return CollectiveCall(
        process_group=_pg(group),
        seq=first.seq,
        op="+".join(c.op for c in calls),
        input_sizes=[list(d) for c in calls for d in c.input_sizes],
        dtypes=sorted({d for c in calls for d in c.dtypes}),
        completed=all(c.completed for c in calls),
        call_site=first.call_site,
    )


def _wavefront(group: Group, dumped: set[int], exited: set[int]) -> GroupWavefront | None:
    entered = {r: max(seqs) for r, seqs in group.calls.items() if seqs and r in group.members}
    if not entered:
        return None
    front = max(entered.values())
    # in it: not completed (and not just passing through); or the process exited from it -- an error completes a
    # collective in the recorder, while a normal completion needs every member, and some never came
    waiting = sorted(
        r for r, s in entered.items() if s == front and (r in exited or any(c.stalled for c in group.calls[r][front]))
    )
    if not waiting:
        return None
    missing = sorted(r for r in group.members if entered.get(r, -1) < front)
    rows = []
    for r in group.members[:MAX_ROWS]:
        seqs = group.calls.get(r, {})
        last = _call_model(group, seqs[max(seqs)]) if seqs else None
        done = [s for s, calls in seqs.items() if all(c.completed for c in calls)]
        state = "waiting" if r in waiting else ("no dump" if r not in dumped else "behind")
        if r not in waiting and r not in missing:
            state = "done"
        if r in exited and r not in missing:
            state = "exited"
        rows.append(WavefrontRank(rank=r, state=state, last_entered=last, last_completed_seq=max(done, default=None)))
    # the first collective the missing ranks never entered holds the others (a later one may be in flight too,
    # e.g. DDP's next gradient bucket); the call most waiting ranks made there is what they wait in
    blocked = min((entered[r] + 1 for r in missing if r in entered), default=front)
    seq = blocked if all(blocked in group.calls[r] for r in waiting) else front
    sigs = Counter(Signature.of(group.calls[r][seq]) for r in waiting)
    common = sigs.most_common(1)[0][0]
    example = next(group.calls[r][seq] for r in waiting if Signature.of(group.calls[r][seq]) == common)
    return GroupWavefront(
        process_group=_pg(group),
        members=list(group.members),
        seq=seq,
        collective=_call_model(group, example),
        waiting_ranks=waiting,
        missing_ranks=missing,
        rows=rows,
    )


def analyse(
    dumps: dict[int, Dump], world_size: int | None = None, stall_s: float = STALL_SECONDS
) -> FlightRecorderFindings:
    """Wavefronts, mismatches and culprits of a job from its ranks' dumps (rank -> dump)."""
    groups, mismatches = _groups(dumps, world_size, stall_s)
    dumped = set(dumps)
    exited = {r for r, d in dumps.items() if dump_reason(d) == "exit"}
    wavefronts: list[GroupWavefront] = []
    notes: list[str] = []
    for group in groups:
        mismatch = _first_mismatch(group)
        if mismatch is not None:
            mismatches.append(mismatch)
        front = _wavefront(group, dumped, exited)
        if front is None:
            continue
        if front.missing_ranks or mismatch is not None:
            wavefronts.append(front)
        else:
            call = front.collective
            what = f"{call.op} seq {call.seq}" if call else f"seq {front.seq}"
            notes.append(
                f"every member of {group.label} is inside {what} and it does not complete: no rank of this group "
                "holds it up (a rank outside it, the network, or a collective that never returns)"
            )
    no_dump = sorted({r for g in groups for r in g.members} - dumped)
    if no_dump:
        notes.append(f"no Flight Recorder dump from {rank_list(no_dump)}")
    if mismatches:
        culprits = sorted({r for m in mismatches for r in m.ranks})
    else:
        culprits = sorted({r for w in wavefronts for r in w.missing_ranks})
    return FlightRecorderFindings(
        ranks=sorted(dumped), wavefronts=wavefronts, mismatches=mismatches, culprits=culprits, notes=notes
    )
