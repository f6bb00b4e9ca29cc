"""What the report's hang section shows, prepared from the diagnosis: ranks grouped by identical main-thread stacks
(the culprits' group first), a one-line summary ("ranks 0, 1, 3: in all_reduce from train.py:52 — rank 2: stuck at
train.py:35 in wait_forever"), and each process group's wavefront as a small table whose rows gather the ranks that
stand at the same place; the counts say which rank holds the job up and which wait for it, and each rank's stacks
and Flight Recorder dump are linked. Pure: it draws nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from stepscope_analyzer.diagnosis.thread_stacks import parse_stacks
from stepscope_analyzer.flight_recorder import rank_list
from stepscope_contract.report import CollectiveCall, Diagnosis, GroupWavefront, Hang, RankReport

MAX_GROUPS = 16


@dataclass(frozen=True)
class RankFiles:
    """A hung rank's files, relative to report.html."""

    rank: int
    stacks: str | None
    flight_recorder: str | None


@dataclass
class StackGroup:
    ranks: list[int]
    culprit: bool
    title: str
    stacks: str
    last_step: int | None
    seconds: float | None
    files: list[RankFiles] = field(default_factory=list)


@dataclass
class WavefrontRow:
    ranks: list[int]
    ranks_text: str
    state: str
    entered: str
    call_site: str
    completed: str


@dataclass
class WavefrontTable:
    title: str
    rows: list[WavefrontRow] = field(default_factory=list)


@dataclass
class HangView:
    summary: str
    groups: list[StackGroup]
    groups_cut: int
    wavefronts: list[WavefrontTable]
    mismatches: list[str]
    notes: list[str]
    counts: str = ""
    """'rank 2 holds the job up; ranks 0, 1, 3 wait for it' (or every hung rank when none stands out)"""
    states: dict[int, str] = field(default_factory=dict)
    """rank -> what it does, for the per-rank table ('stuck: the culprit', 'waiting in all_reduce')"""
    reasons: dict[int, str] = field(default_factory=dict)
    """rank -> why it has no figures ('no step boundary: it waits for rank 2 in all_reduce')"""


def _stack_key(hang: Hang) -> tuple[str, ...]:
    """The main thread's frames by file name, line and function: pods differ in paths, not in code."""
    main = parse_stacks(hang.stacks).main
    if main is None or not main.frames:
        return ("no-stacks", str(hang.rank))
    return tuple(f"{PurePosixPath(f.filename).name}:{f.line}:{f.function}" for f in main.frames)


def _where(hang: Hang) -> str:
    if hang.waiting_collective:
        return f"in {hang.waiting_collective}" + (f" from {hang.location}" if hang.location else "")
    if hang.location:
        return f"stuck at {hang.location}"
    return "no stacks"


def _groups(hangs: list[Hang]) -> list[StackGroup]:
    by_key: dict[tuple[bool, tuple[str, ...], str], list[Hang]] = {}
    for hang in hangs:
        by_key.setdefault((hang.culprit, _stack_key(hang), _where(hang)), []).append(hang)
    groups = []
    for (culprit, _, where), members in by_key.items():
        first = members[0]
        title = f"{rank_list([h.rank for h in members])}: {where}" + (" — the culprit" if culprit else "")
        groups.append(
            StackGroup(
                ranks=[h.rank for h in members],
                culprit=culprit,
                title=title,
                stacks=first.stacks,
                last_step=first.last_step,
                seconds=first.seconds_since_last_step,
            )
        )
    return sorted(groups, key=lambda g: (not g.culprit, g.ranks[0]))


def _shape(call: CollectiveCall) -> str:
    return ", ".join("[" + ", ".join(map(str, d)) + "]" for d in call.input_sizes) or "[]"


def _call(call: CollectiveCall | None, front: GroupWavefront | None = None) -> tuple[str, str]:
    """The last collective a rank entered; a rank waiting at the wavefront that has entered later collectives too
    (DDP's buckets are issued together) is shown in the wavefront's collective first, as the table's title is."""
    if call is None:
        return "—", ""
    state = "completed" if call.completed else "not completed"
    text = f"{call.op} {_shape(call)} seq {call.seq} ({state})"
    at = front.collective if front is not None else None
    if at is not None and call.seq > at.seq and not call.completed:
        first = f"{at.op} {_shape(at)} seq {at.seq} (not completed)"
        return f"{first}, then up to {text}", at.call_site or call.call_site or ""
    return text, call.call_site or ""


def _table(front: GroupWavefront) -> WavefrontTable:
    name, _, desc = front.process_group.partition(":")
    label = desc if desc and desc != "undefined" else f"process group {name}"
    call = front.collective
    what = f"{call.op} {_shape(call)}" if call else ""
    site = f", issued at {call.call_site}" if call and call.call_site else ""
    table = WavefrontTable(title=f"{label}, seq {front.seq}: {what}{site}")
    by_row: dict[tuple[str, str, str, str], list[int]] = {}
    for row in front.rows:
        text, where = _call(row.last_entered, front if row.state == "waiting" else None)
        done = "—" if row.last_completed_seq is None else f"seq {row.last_completed_seq}"
        by_row.setdefault((row.state, text, where, done), []).append(row.rank)
    order = {"behind": 0, "no dump": 1, "waiting": 2, "exited": 3, "done": 4}
    for (state, text, where, done), ranks in sorted(by_row.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[1])):
        table.rows.append(WavefrontRow(ranks, rank_list(ranks).split(" ", 1)[1], state, text, where, done))
    return table


def _counts(d: Diagnosis) -> tuple[str, dict[int, str], dict[int, str]]:
    """Who holds the job up and who waits for it, from the hang diagnosis (its culprits), each hung rank's state in
    words and why it has no step figures."""
    culprits = {s.rank: s.cause.value for s in d.slow_ranks if s.rank in {h.rank for h in d.hangs if h.culprit}}
    whom = rank_list(sorted(culprits))
    states: dict[int, str] = {}
    reasons: dict[int, str] = {}
    for h in d.hangs:
        if h.rank in culprits:
            desync = culprits[h.rank] == "desync"
            states[h.rank] = f"{'called another collective' if desync else 'stuck'}: the culprit"
            reasons[h.rank] = "no step boundary: it holds the job up" + (f" ({_where(h)})" if h.location else "")
        elif culprits:
            inside = f" in {h.waiting_collective}" if h.waiting_collective else ""
            states[h.rank] = f"waiting{inside}" if inside else f"waiting for {whom}"
            reasons[h.rank] = f"no step boundary: it waits for {whom}{inside}"
        else:
            states[h.rank] = f"waiting in {h.waiting_collective}" if h.waiting_collective else "hung"
            reasons[h.rank] = f"no step boundary ({_where(h)})"
    waiting = sorted(r for r in states if r not in culprits)
    if not culprits:
        return f"{rank_list(sorted(states))} hung; none stands out as the one the others wait for", states, reasons
    holds = f"{whom} {'holds' if len(culprits) == 1 else 'hold'} the job up"
    return (f"{holds}; {rank_list(waiting)} wait for it" if waiting else holds), states, reasons


def _files(members: list[int], ranks: dict[int, RankReport]) -> list[RankFiles]:
    out = []
    for rank in members:
        r = ranks.get(rank)
        if r is not None and (r.stacks_link or r.flight_recorder_link):
            out.append(RankFiles(rank, r.stacks_link, r.flight_recorder_link))
    return out


def hang_view(d: Diagnosis, ranks: list[RankReport] | None = None) -> HangView | None:
    fr = d.flight_recorder
    has_fr = fr is not None and (fr.wavefronts or fr.mismatches or fr.notes)
    if not d.hangs and not has_fr:
        return None
    by_rank = {r.rank: r for r in ranks or []}
    groups = _groups(d.hangs)
    for g in groups:
        g.files = _files(g.ranks, by_rank)
    summary = " — ".join(g.title.replace(" — the culprit", "") for g in groups[:6])
    counts, states, reasons = _counts(d) if d.hangs else ("", {}, {})
    return HangView(
        counts=counts,
        states=states,
        reasons=reasons,
        summary=summary,
        groups=groups[:MAX_GROUPS],
        groups_cut=max(0, len(groups) - MAX_GROUPS),
        wavefronts=[_table(w) for w in fr.wavefronts] if fr else [],
        mismatches=[m.message for m in fr.mismatches] if fr else [],
        notes=list(fr.notes) if fr else [],
    )
