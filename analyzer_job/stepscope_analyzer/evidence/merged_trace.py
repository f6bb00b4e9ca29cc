"""One Chrome/Perfetto JSON trace of the recorded steps of a few ranks, each rank a process (pid = rank), clocks
aligned on collective ends (stepscope_contract.merged_trace). Pure: parsed Kineto documents in, a document out.

Alignment, as the report's timeline aligns its rows: a collective ends on every rank when its last rank arrives, so
in each recorded step the end of the rank's last collective is the same instant everywhere (gloo: regions and NCCL
kernels: the collectives as they run, not their launches). A rank's offset is the median, over the steps both
have, of (the first rank's anchor - its anchor); the skew is the largest spread of one step's anchors once
shifted. A rank without collectives is aligned on its steps' ends. Events keep their names, categories, threads
and arguments; GPU streams get thread ids of their own (TID_GPU_BASE + device x 1000 + stream) so they cannot meet
the host's threads inside the rank's process; flow events are left out (their ids are per rank). Each rank keeps
at most MAX_EVENTS / ranks events, its first ones.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.merged_trace import MAX_EVENTS, MergedTrace

STEP_PREFIX = "ProfilerStep#"
KEPT_PHASES = frozenset({"X", "i", "I", "C"})
TID_GPU_BASE = 1 << 30
_COLLECTIVE_PREFIXES = ("gloo:",)
"""collectives as they run: gloo's regions on its worker threads (c10d:: ops, record_param_comms and nccl: regions
only launch them), and NCCL's kernels"""


@dataclass
class RankTrace:
    rank: int
    label: str
    """the process name: 'rank 2 (pod-2)'"""
    events: list[dict[str, Any]]
    """the rank's traceEvents as it recorded them"""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def is_collective(event: dict[str, Any]) -> bool:
    name = event.get("name")
    if not isinstance(name, str):
        return False
    return name.startswith(_COLLECTIVE_PREFIXES) or (event.get("cat") == "kernel" and "nccl" in name.lower())


def steps_of(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) of each ProfilerStep#, in time order."""
    out = []
    for e in events:
        name, ts, dur = e.get("name"), _number(e.get("ts")), _number(e.get("dur"))
        if e.get("ph") == "X" and isinstance(name, str) and name.startswith(STEP_PREFIX) and ts is not None:
            out.append((ts, ts + (dur or 0.0)))
    return sorted(out)


def anchors(events: list[dict[str, Any]]) -> list[float]:
    """Per recorded step, where its last collective ends (the step's end when it has none)."""
    steps = steps_of(events)
    ends: list[float | None] = [None] * len(steps)
    starts = [s for s, _ in steps]
    for e in events:
        ts, dur = _number(e.get("ts")), _number(e.get("dur"))
        if e.get("ph") != "X" or ts is None or not is_collective(e):
            continue
        i = _index(starts, ts)
        if i is not None and ts < steps[i][1]:
            end = ts + (dur or 0.0)
            ends[i] = end if ends[i] is None else max(end, ends[i] or end)
    return [end if end is not None else steps[i][1] for i, end in enumerate(ends)]


def _index(starts: list[float], ts: float) -> int | None:
    import bisect

    i = bisect.bisect_right(starts, ts) - 1
    return i if i >= 0 else None


def offsets(ranks: list[RankTrace]) -> tuple[dict[int, float], float]:
    """Per rank, what to add to its timestamps, and the skew left (µs)."""
    marks = {t.rank: anchors(t.events) for t in ranks}
    usable = [r for r in marks if marks[r]]
    if not usable:
        return {t.rank: 0.0 for t in ranks}, 0.0
    ref = marks[usable[0]]
    shift = {}
    for r, mine in marks.items():
        pairs = list(zip(ref, mine, strict=False))
        shift[r] = median([a - b for a, b in pairs]) if pairs else 0.0
    steps = min(len(marks[r]) for r in usable)
    skew = max((max(marks[r][k] + shift[r] for r in usable) - min(marks[r][k] + shift[r] for r in usable)
                for k in range(steps)), default=0.0)  # fmt: skip
    return shift, skew


def _window(events: list[dict[str, Any]]) -> tuple[float, float] | None:
    steps = steps_of(events)
    return (steps[0][0], steps[-1][1]) if steps else None


def _host_pids(events: list[dict[str, Any]]) -> set[Any]:
    """The rank's host process ids: those of its ProfilerStep# spans."""
    return {e.get("pid") for e in events if isinstance(e.get("name"), str) and e["name"].startswith(STEP_PREFIX)}


def _tid(event: dict[str, Any], host: set[Any]) -> int:
    tid = event.get("tid")
    if event.get("pid") in host or not isinstance(event.get("pid"), int):
        return tid if isinstance(tid, int) and 0 <= tid < TID_GPU_BASE else zlib.crc32(str(tid).encode()) % TID_GPU_BASE
    stream = tid if isinstance(tid, int) else zlib.crc32(str(tid).encode()) % 1000
    return TID_GPU_BASE + int(event["pid"]) % 1000 * 1000 + stream % 1000


def _rank_events(t: RankTrace, shift: float, budget: int) -> tuple[list[dict[str, Any]], int, dict[int, str]]:
    """The rank's kept events (shifted, pid = rank), how many were left out, and its threads' names."""
    window = _window(t.events)
    host = _host_pids(t.events)
    names: dict[int, str] = {}
    kept = []
    for e in t.events:
        ts = _number(e.get("ts"))
        if e.get("ph") == "M" and e.get("name") == "thread_name" and isinstance(e.get("args"), dict):
            names[_tid(e, host)] = str(e["args"].get("name", ""))[:200]
            continue
        if e.get("ph") not in KEPT_PHASES or ts is None or not isinstance(e.get("name"), str):
            continue
        if window is not None and not window[0] <= ts <= window[1]:
            continue
        kept.append({**e, "pid": t.rank, "tid": _tid(e, host), "ts": round(ts + shift, 3)})
    kept.sort(key=lambda e: e["ts"])
    for e in kept[:budget]:
        if e["tid"] >= TID_GPU_BASE and e["tid"] not in names:
            device, stream = divmod(e["tid"] - TID_GPU_BASE, 1000)
            names[e["tid"]] = f"GPU {device} stream {stream}"
    return kept[:budget], max(len(kept) - budget, 0), names


def _metadata(rank: int, label: str, threads: dict[int, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": label}},
        {"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}},
    ]
    for tid, name in sorted(threads.items()):
        out.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": name}})
    return out


def merge(ranks: list[RankTrace], step_index: int | None = None) -> tuple[dict[str, Any], MergedTrace]:
    """The merged document and what it holds; `step_index`: the timeline's step, whose start per rank is noted."""
    shift, skew = offsets(ranks)
    budget = MAX_EVENTS // max(len(ranks), 1)
    events: list[dict[str, Any]] = []
    left_out = 0
    starts: dict[str, float] = {}
    for t in sorted(ranks, key=lambda t: t.rank):
        kept, dropped, threads = _rank_events(t, shift[t.rank], budget)
        events += _metadata(t.rank, t.label, threads) + kept
        left_out += dropped
        steps = steps_of(t.events)
        if step_index is not None and 0 <= step_index < len(steps):
            starts[str(t.rank)] = steps[step_index][0] + shift[t.rank]
    first = min((e["ts"] for e in events if e["ph"] != "M"), default=0.0)
    starts = {r: round(ts - first, 3) for r, ts in starts.items()}  # as Perfetto shows it: from the trace's start
    info = MergedTrace(ranks=sorted(t.rank for t in ranks), events=len(events), events_left_out=left_out,
                       skew_us=round(skew, 3), offsets_us={str(r): round(v, 3) for r, v in sorted(shift.items())},
                       row_ts_us=starts)  # fmt: skip
    document = {"traceEvents": events, "displayTimeUnit": "ms",
                "stepscope": {"merged": True, "ranks": info.ranks, "skewUs": info.skew_us}}  # fmt: skip
    return document, info
