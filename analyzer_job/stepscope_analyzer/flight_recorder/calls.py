"""Flight Recorder entries as calls: which collective, in which process group, at which sequence number, whether it
completed, how long it had been in flight when the dump was taken, and the Python line that issued it. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_analyzer.flight_recorder.call_site import call_site
from stepscope_analyzer.flight_recorder.dump import Dump, Entry
from stepscope_contract.ranks import format_rank_set

DEFAULT_GROUP_DESCS = frozenset({"default_pg"})
# Dumps the hook wrote because the training stood still or ended: what is in flight there will not complete.
STOPPED_REASONS = frozenset({"hang", "exit"})
STALL_SECONDS = 1.0


@dataclass(frozen=True)
class Call:
    """One collective (or the ops of one coalesced collective) a rank issued in a process group."""

    rank: int
    group: str
    group_desc: str
    seq: int
    op: str
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    completed: bool
    stalled: bool  # in flight and not going to complete: a hang or exit dump, or in flight for stall_s or more
    call_site: str | None

    @property
    def shape_text(self) -> str:
        """'[1024]' for one tensor, '[2, 3], [4]' for several, '[]' for none."""
        if not self.input_sizes:
            return "[]"
        return ", ".join("[" + ", ".join(str(d) for d in dims) + "]" for dims in self.input_sizes)


def rank_list(ranks: list[int]) -> str:
    """'rank 2', 'ranks 0, 1, 3'; long lists as ranges ('ranks 0-63,65-127')."""
    ordered = sorted(ranks)
    noun = "rank" if len(ordered) == 1 else "ranks"
    text = ", ".join(map(str, ordered)) if len(ordered) <= 8 else format_rank_set(ordered)
    return f"{noun} {text}"


def op_name(profiling_name: str) -> str:
    """'gloo:all_reduce' -> 'all_reduce'; 'nccl:send 0->1' -> 'send'."""
    name = profiling_name.split(":", 1)[-1].strip()
    return name.split(" ", 1)[0] or profiling_name


def group_label(name: str, desc: str) -> str:
    """How a report names a process group: its description when it has one, else its name."""
    if desc and desc != "undefined":
        return desc if desc in DEFAULT_GROUP_DESCS or desc == name else f"{desc} (process group {name})"
    return f"process group {name}"


def _completed(dump: Dump, entry: Entry, seq: int) -> bool:
    if entry.state == "completed":
        return True
    last = dump.last_completed(entry.pg_id)
    if last is not None and last >= 0:
        return seq <= last
    return entry.retired


def dump_reason(dump: Dump) -> str:
    return dump.stepscope.reason if dump.stepscope is not None else ""


def rank_calls(rank: int, dump: Dump, stall_s: float = STALL_SECONDS) -> list[Call]:
    """The collectives of one dump (point-to-point ops are left out: they have no group-wide sequence)."""
    dumped_at = dump.stepscope.dumped_at_ns if dump.stepscope is not None else None
    stopped = dump_reason(dump) in STOPPED_REASONS
    calls: list[Call] = []
    for entry in dump.entries:
        if entry.is_p2p:
            continue
        seq = entry.collective_seq_id
        completed = _completed(dump, entry, seq)
        age = None
        if dumped_at is not None and entry.time_created_ns:
            age = max(0.0, (dumped_at - entry.time_created_ns) / 1e9)
        stalled = not completed and (stopped or age is None or age >= stall_s)
        calls.append(
            Call(
                rank=rank,
                group=entry.process_group[0],
                group_desc=entry.process_group[1] if len(entry.process_group) > 1 else "",
                seq=seq,
                op=op_name(entry.profiling_name),
                input_sizes=tuple(tuple(d) for d in entry.input_sizes),
                output_sizes=tuple(tuple(d) for d in entry.output_sizes),
                dtypes=tuple(entry.input_dtypes) + tuple(entry.output_dtypes),
                completed=completed,
                stalled=stalled,
                call_site=call_site(entry.frames),
            )
        )
    return calls
