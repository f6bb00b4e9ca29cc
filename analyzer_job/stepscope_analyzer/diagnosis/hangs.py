"""Hangs and desyncs: which rank holds the job up, which collective the others wait in, and from which line.

When one rank stops (a deadlock, an endless loop, a stuck data loader, a dead process) or calls a different
collective than its peers, every other rank blocks inside the collective and their watchdogs fire too. Two sources
name the culprit:
1. the ranks' Flight Recorder dumps (flight_recorder.wavefront): the first mismatch at a sequence number, else the
   members missing from the wavefront of a process group in which others wait -- the strongest evidence;
2. the Python stacks every hung rank uploads: ranks whose main thread is inside a collective wait; a rank whose main
   thread is elsewhere is the culprit (named by its frame and line); when all wait, one calling a different
   collective than the others is.
`slow_ranks` gets exactly the culprits (cause `desync` for a rank that called another collective than its peers,
else `hang`); `hangs` gets every hung rank with what it waits in. Pure.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from stepscope_analyzer.diagnosis.thread_stacks import (
    COLLECTIVES,
    Position,
    parse_stacks,
    position,
    shown_stacks,
)
from stepscope_analyzer.flight_recorder import Dump, analyse, rank_list
from stepscope_analyzer.ranks.hang_evidence import HangEvidence
from stepscope_contract.report import (
    Cause,
    CollectiveCall,
    Evidence,
    FlightRecorderFindings,
    GroupWavefront,
    Hang,
    SlowRank,
)

__all__ = ["COLLECTIVES", "HangEvidence", "HangFindings", "collective_in_stacks", "dumps_only_verdict", "find_hangs"]


@dataclass
class HangFindings:
    hangs: list[Hang] = field(default_factory=list)
    slow_ranks: list[SlowRank] = field(default_factory=list)
    flight_recorder: FlightRecorderFindings | None = None
    verdict: str | None = None


def collective_in_stacks(stacks: str) -> str | None:
    """The collective a rank's main thread waits in, if any (from its stack dump)."""
    return position(parse_stacks(stacks)).collective


def _call_text(call: CollectiveCall | None, label: str) -> str:
    if call is None:
        return "a collective"
    where = f", issued at {call.call_site}" if call.call_site else ""
    return f"{call.op} {_shape(call)} (seq {call.seq} of {label}{where})"


def _shape(call: CollectiveCall) -> str:
    return ", ".join("[" + ", ".join(map(str, dims)) + "]" for dims in call.input_sizes) or "[]"


def _label(front: GroupWavefront) -> str:
    name, _, desc = front.process_group.partition(":")
    return desc if desc and desc != "undefined" else f"process group {name}"


@dataclass
class _Ctx:
    evidence: dict[int, HangEvidence]
    positions: dict[int, Position]
    findings: FlightRecorderFindings | None
    healthy: frozenset[int] = frozenset()  # ranks whose capture completed: they kept stepping


def _where(ctx: _Ctx, rank: int) -> str:
    """Where a rank stands, as its stacks (or their absence) say."""
    pos = ctx.positions.get(rank)
    if pos is not None and pos.location and pos.collective is None:
        return f"it is stuck at {pos.location}"
    if pos is not None and pos.collective:
        return f"its stacks show it in {pos.collective} from {pos.location}"
    if rank not in ctx.evidence:
        dumped = ctx.findings is not None and rank in ctx.findings.ranks
        if dumped:
            return "it did not hang (no stacks), yet never reached it"
        return "it left neither stacks nor a Flight Recorder dump: its process died or stopped answering"
    return "no stacks were captured"


def _culprit(ctx: _Ctx, rank: int, confidence: float, detail: str, cause: Cause = Cause.HANG) -> SlowRank:
    e = ctx.evidence.get(rank)
    return SlowRank(
        rank=rank,
        cause=cause,
        confidence=confidence,
        node=e.node if e else None,
        evidence=[
            Evidence(
                metric="seconds_since_last_step",
                value=(e.seconds_since_last_step or 0.0) if e else 0.0,
                baseline=0.0,
                unit="s",
                detail=detail,
            )
        ],
    )


def _in_text(front: GroupWavefront, entered: list[int]) -> str:
    """'ranks 0, 1, 3 wait in X', or how far they got when their processes exited."""
    what = _call_text(front.collective, _label(front))
    exited = [row.rank for row in front.rows if row.state == "exited"]
    if exited and set(exited) >= set(entered):
        return f"{rank_list(entered)} were in {what} when their processes exited with an error"
    tail = f" ({rank_list(exited)} then exited with an error)" if exited else ""
    return f"{rank_list(entered)} wait in {what}{tail}"


def _not_a_culprit(ctx: _Ctx, rank: int) -> bool:
    """A rank that kept stepping (its capture completed), or whose dump is missing (rejected, or FR off) while its
    stacks show it waiting in a collective: one of the waiting, not the one they wait for."""
    if rank in ctx.healthy:
        return True
    pos = ctx.positions.get(rank)
    dumped = ctx.findings is not None and rank in ctx.findings.ranks
    return not dumped and pos is not None and pos.collective is not None


def _from_flight_recorder(ctx: _Ctx) -> tuple[list[SlowRank], str] | None:
    findings = ctx.findings
    if findings is None or not findings.culprits:
        return None
    if findings.mismatches and not all(r in ctx.healthy for m in findings.mismatches for r in m.ranks):
        first = findings.mismatches[0]
        desync = Cause.DESYNC
        slow = [_culprit(ctx, r, 0.95, f"{first.message}; {_where(ctx, r)}", desync) for r in first.ranks]
        for m in findings.mismatches[1:]:
            slow += [_culprit(ctx, r, 0.9, m.message, desync) for r in m.ranks if r not in {s.rank for s in slow}]
        kind = "collective" if first.kind == "op" else first.kind
        return slow, f"Desync ({kind} mismatch): {first.message}."
    slow = []
    for w in findings.wavefronts:
        entered = [r for r in w.members if r not in w.missing_ranks]
        for r in w.missing_ranks:
            if r in {s.rank for s in slow} or _not_a_culprit(ctx, r):
                continue
            known = r in ctx.evidence or r in findings.ranks
            detail = f"{_in_text(w, entered)}; rank {r} never reached it: {_where(ctx, r)}"
            slow.append(_culprit(ctx, r, 0.95 if known else 0.8, detail))
    if not slow:
        return None
    culprits = {s.rank for s in slow}
    front = next(w for w in findings.wavefronts if culprits & set(w.missing_ranks))
    missing = [r for r in front.missing_ranks if r in culprits]
    entered = [r for r in front.members if r not in missing]
    where = (
        _where(ctx, missing[0]) if len(missing) == 1 else "; ".join(f"rank {r}: {_where(ctx, r)}" for r in missing[:4])
    )
    verdict = f"Hang: {_in_text(front, entered)}; {rank_list(missing)} never reached it: {where}."
    return slow, verdict


def _from_stacks(ctx: _Ctx) -> tuple[list[SlowRank], str] | None:
    with_stacks = {r: p for r, p in ctx.positions.items() if p.has_stacks}
    waiting = {r: p for r, p in with_stacks.items() if p.collective}
    outside = sorted(r for r, p in with_stacks.items() if not p.collective)
    if not waiting:
        if not ctx.evidence:
            return None
        # nobody waits in a collective: every hung rank is stuck on its own
        stuck = sorted(ctx.evidence)
        slow = [_culprit(ctx, r, 0.6, f"no step boundary within the step timeout; {_where(ctx, r)}") for r in stuck]
        where = "; ".join(f"rank {r}: {_where(ctx, r)}" for r in stuck[:4])
        return slow, f"Hang: {rank_list(stuck)} stopped reaching step boundaries outside any collective; {where}."
    votes = Counter((p.collective, p.location) for p in waiting.values())
    (collective, line), _ = votes.most_common(1)[0]
    majority = sorted(r for r, p in waiting.items() if (p.collective, p.location) == (collective, line))
    what = _issued(collective, line)
    if outside:
        detail = f"{rank_list(majority)} wait in {what}"
        slow = [
            _culprit(ctx, r, 0.9, f"{detail}; rank {r} is outside any collective: {_where(ctx, r)}") for r in outside
        ]
        where = "; ".join(f"rank {r} at {ctx.positions[r].location}" for r in outside[:4])
        verdict = f"Hang: {rank_list(majority)} wait in {what}; {rank_list(outside)} never reached it: stuck {where}."
        return slow, verdict
    odd = sorted(r for r in waiting if waiting[r].collective != collective)
    if odd and len(odd) < len(majority):
        slow = []
        for r in odd:
            p = waiting[r]
            text = f"rank {r} waits in {_issued(p.collective, p.location)} where {rank_list(majority)} "
            slow.append(_culprit(ctx, r, 0.7, text + f"wait in {what}", Cause.DESYNC))
        return slow, f"Desync: {slow[0].evidence[0].detail} (from their stacks)."
    if odd:  # as many ranks in each collective: the stacks cannot tell which side diverged
        return [], _tie_verdict(waiting)
    return None


def _issued(collective: str | None, location: str | None) -> str:
    return f"{collective} (issued at {location})" if location else str(collective)


def _tie_verdict(waiting: dict[int, Position]) -> str:
    """Ranks wait in different collectives, none in a majority: say where each group waits, blame nobody."""
    groups: dict[str, list[int]] = {}
    for r, p in sorted(waiting.items()):
        groups.setdefault(_issued(p.collective, p.location), []).append(r)
    sides = "; ".join(f"{rank_list(ranks)} in {where}" for where, ranks in list(groups.items())[:4])
    return (
        f"Desync: the ranks wait in different collectives ({sides}); with as many ranks on each side their stacks "
        "cannot tell which one diverged: the collective issued on one side only is the place to look."
    )


def find_hangs(
    evidence: list[HangEvidence],
    dumps: dict[int, Dump] | None = None,
    world_size: int | None = None,
    healthy: set[int] | None = None,
) -> HangFindings:
    """Hang entries for every hung rank, the culprits as slow ranks with cause `hang` or `desync`, the Flight Recorder
    findings when dumps exist, and the verdict line when the job is hung or desynchronised. `healthy`: ranks whose
    capture completed (they kept stepping), never culprits."""
    hung = {e.rank: e for e in sorted(evidence, key=lambda e: e.rank) if e.hung}
    parsed = {r: parse_stacks(e.stacks) for r, e in hung.items()}
    findings = analyse(dumps, world_size) if dumps else None
    ctx = _Ctx(hung, {r: position(p) for r, p in parsed.items()}, findings, frozenset(healthy or ()))
    decided = _from_flight_recorder(ctx) or _from_stacks(ctx)
    if not hung and decided is None:
        return HangFindings(flight_recorder=findings)
    slow, verdict = decided if decided else ([], None)
    culprits = {s.rank for s in slow}
    waits = _waits_from_flight_recorder(findings)
    hangs = []
    for r, e in hung.items():
        pos = ctx.positions[r]
        fr = waits.get(r)
        hangs.append(
            Hang(
                rank=r,
                last_step=e.last_step,
                seconds_since_last_step=e.seconds_since_last_step,
                stacks=shown_stacks(parsed[r], e.stacks),
                waiting_collective=fr.op if fr and r not in culprits else pos.collective,
                culprit=r in culprits,
                location=(fr.call_site if fr and r not in culprits else None) or pos.location,
            )
        )
    if verdict is None:
        seen = sorted({h.waiting_collective for h in hangs if h.waiting_collective})
        inside = f" wait in {', '.join(seen)}" if seen else " stopped reaching step boundaries"
        verdict = (
            f"Hang: {rank_list(sorted(hung))}{inside}; no rank stands out as the one holding the others up (a rank "
            "that was not captured, a peer that died, or the network)."
        )
    return HangFindings(hangs=hangs, slow_ranks=slow, flight_recorder=findings, verdict=verdict)


def _waits_from_flight_recorder(findings: FlightRecorderFindings | None) -> dict[int, CollectiveCall]:
    """rank -> the collective the Flight Recorder shows it waiting in."""
    out: dict[int, CollectiveCall] = {}
    for front in findings.wavefronts if findings else []:
        for row in front.rows:
            if row.state == "waiting" and row.last_entered is not None:
                out.setdefault(row.rank, row.last_entered)
    return out


def dumps_only_verdict(findings: FlightRecorderFindings | None) -> str | None:
    """The verdict of a session that holds Flight Recorder dumps but no trace (an on-demand dump)."""
    if findings is None or findings.culprits or findings.notes:
        return None
    return (
        f"Flight Recorder dumps of {rank_list(findings.ranks)}: no collective is held up (no wavefront, no mismatch)."
    )
