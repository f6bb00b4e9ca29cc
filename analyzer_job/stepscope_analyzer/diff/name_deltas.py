"""Per-name time and calls per step on each side, per rank and job-wide, and what changed: HTA TraceDiff's added /
removed / changed over every kernel, op, region and function the ranks' reports list. Pure.

Names are compared by name_keys.name_key (memory addresses, process ids and temporary folders taken out). A name's
figure on one side is its summed time (and calls) over the analysed ranks divided by their recorded steps ("µs per step,
per rank"); on one rank, that rank's sums over its own steps.

Which time: the self (exclusive) time of leaf work (ops, kernels, regions, and the Python frames' own time), so an op
added under `forward` is one change, not the op plus every frame above it; where a Python frame or annotated region is
itself new (added) or gone (removed), its inclusive time: that call site is the change. Collectives come from the ranks'
collective tables: their transfer time (total less the wait for the last rank) is the change, the waiting is carried
beside it and never ranked, since it is the consequence of another rank or op. A change that sits on some ranks only is
kept on the rank where it is largest (a +60 ms change on one rank of four is +60 ms there, not +15 ms on average), or
for a name of the added work on the added work's rank (one rank per fact). `scales` (the machine's speed between the
recordings, op_speed.py, job-wide and per rank) divides the candidate's times in the ranking figure, so an unchanged op
that only ran at the machine's speed does not outrank the change: an op with the same calls by the slowest end of the
speed's interval (only what the machine's speed cannot explain ranks it), one whose calls changed by the estimate.
A report lists each rank's top names only (`--top-n`); when the diff analyses traces itself it keeps many more
(DIFF_TOP_N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from stepscope_analyzer.diff.name_keys import name_key
from stepscope_analyzer.diff.step_samples import analysed_ranks
from stepscope_contract.diff import ChangeKind, TopChange
from stepscope_contract.report import RankReport, Report

KERNEL_KIND = {"COMPUTATION": "kernel", "COMMUNICATION": "communication", "MEMORY": "memory"}
COMMUNICATION = "communication"
C10D = "c10d::"
"""a collective's host-side call (c10d::allreduce_): where the backend's own event (gloo:*, nccl) is listed too,
the same collective, counted once through the backend's event"""
FRAMES = frozenset({"python", "user_annotation"})
"""kinds whose inclusive time is the change when the name itself is new (a new call site)"""
MAX_TOTAL_US = 1e15
"""a name's time beyond this (or not finite) in a report.json is not a measurement: left out"""
MIN_DELTA_US = 0.5
"""|delta| per step below this, with the same calls per step, is no change"""
SAME_CALLS = 0.01
"""calls per step within this share: the same calls (op_speed.py's rule)"""
ONE_RANK = 1.5
"""a change is kept on one rank when its largest per-rank delta is this many times the job-wide one"""

Key = tuple[str, str]  # (kind, name key)


@dataclass
class Fig:
    """Sums over one rank's (or the job's) recorded steps."""

    self_us: float = 0.0
    incl_us: float = 0.0
    calls: float = 0.0
    wait_us: float = 0.0

    def add(self, other: Fig) -> None:
        self.self_us += other.self_us
        self.incl_us += other.incl_us
        self.calls += other.calls
        self.wait_us += other.wait_us

    def per_step(self, steps: int) -> Fig:
        n = max(steps, 1)
        return Fig(self.self_us / n, self.incl_us / n, self.calls / n, self.wait_us / n)


def _ok(*values: float) -> bool:
    return all(math.isfinite(v) and 0.0 <= v <= MAX_TOTAL_US for v in values)


@dataclass
class RankNames:
    steps: int
    figs: dict[Key, Fig] = field(default_factory=dict)
    floor: dict[str, float] = field(default_factory=dict)
    """per kind, the smallest inclusive time the rank's report lists (below it a name may have been cut)"""
    call_floors: dict[str, float] = field(default_factory=dict)
    """CPU ranks: per op (name key), the summed least own time of its calls in a step (RankReport.call_floors),
    which waiting for a CPU does not raise"""

    def add(self, key: Key, fig: Fig) -> None:
        if not _ok(fig.self_us, fig.incl_us, fig.calls, fig.wait_us):
            return
        self.figs.setdefault(key, Fig()).add(fig)
        self.floor[key[0]] = min(self.floor.get(key[0], math.inf), fig.incl_us)


@dataclass
class NameTimes:
    """One side: per rank, and job-wide sums (`us`: inclusive time, the figure op_speed.py compares per call: an
    op's inclusive time per call is a steadier gauge of the machine's speed than its self time, which for most ops
    is a few µs of bookkeeping)."""

    ranks: dict[int, RankNames] = field(default_factory=dict)
    us: dict[Key, float] = field(default_factory=dict)
    calls: dict[Key, float] = field(default_factory=dict)
    job: dict[Key, Fig] = field(default_factory=dict)
    steps: int = 0

    def per_step(self, key: Key) -> tuple[float, float]:
        """(inclusive µs, calls) per step, job-wide."""
        if self.steps <= 0:
            return 0.0, 0.0
        return self.us.get(key, 0.0) / self.steps, self.calls.get(key, 0.0) / self.steps

    def job_fig(self, key: Key) -> Fig:
        return self.job.get(key, Fig()).per_step(self.steps)


def rank_names(rank: RankReport) -> RankNames:
    out = RankNames(steps=max(rank.steps.count, 1))
    from_table = bool(rank.collectives)
    seen: set[str] = set()
    for f in rank.top_functions:
        seen.add(f.name)
        if f.category == COMMUNICATION and from_table:
            continue
        own = f.total_us if f.self_us is None else f.self_us
        out.add((f.category, name_key(f.name)), Fig(own, f.total_us, f.count))
    for k in rank.top_kernels:  # kernels below the functions' cut
        kind = KERNEL_KIND.get(k.kernel_type, "kernel")
        if k.name in seen or (kind == COMMUNICATION and from_table):
            continue
        out.add((kind, name_key(k.name)), Fig(k.sum_us, k.sum_us, k.count))
    backend = any(not c.name.startswith(C10D) for c in rank.collectives)
    for c in rank.collectives:
        if backend and c.name.startswith(C10D):  # the host-side call of a collective the backend's event holds
            continue
        wait = min(max(c.wait_us, 0.0), c.total_us)
        out.add((COMMUNICATION, name_key(c.name)), Fig(c.total_us - wait, c.total_us, c.count, wait))
    if rank.call_floors is not None:
        for call, floor in zip(rank.call_floors.calls, rank.call_floors.floor_us, strict=False):
            if _ok(floor):
                op = name_key(call.rpartition("#")[0] or call)
                out.call_floors[op] = out.call_floors.get(op, 0.0) + floor
    return out


def name_times(report: Report) -> NameTimes:
    out = NameTimes()
    for rank in analysed_ranks(report):
        names = rank_names(rank)
        out.ranks[rank.rank] = names
        out.steps += names.steps
        for key, fig in names.figs.items():
            out.job.setdefault(key, Fig()).add(fig)
            out.us[key] = out.us.get(key, 0.0) + fig.incl_us
            out.calls[key] = out.calls.get(key, 0.0) + fig.calls
    return out


def _figure(fig: Fig, kind: str, site: bool) -> float:
    """The time a change is read by: self time; inclusive for a new or removed frame or region (a call site that
    came or went)."""
    return fig.incl_us if site and kind in FRAMES else fig.self_us


@dataclass(frozen=True)
class _Side:
    b: Fig
    c: Fig
    rank: int | None


def one_rank(t: NameTimes, rank: int) -> NameTimes:
    """One rank of a side as a side of its own (for that rank's op speed)."""
    names = t.ranks[rank]
    return NameTimes(
        ranks={rank: names},
        us={k: f.incl_us for k, f in names.figs.items()},
        calls={k: f.calls for k, f in names.figs.items()},
        job=dict(names.figs),
        steps=names.steps,
    )


@dataclass(frozen=True)
class Scales:
    """The machine's speed (candidate / baseline per call) that divides the candidate's times in the ranking: job-wide,
    and per rank (a neighbour that shares one rank's core slows that rank alone)."""

    job: float = 1.0
    ranks: dict[int, float] = field(default_factory=dict)
    job_high: float = 1.0
    ranks_high: dict[int, float] = field(default_factory=dict)
    """the slowest end of each speed's interval: what the machine's speed could explain of an op with the same calls"""

    def of(self, rank: int | None, same_calls: bool = False) -> float:
        if same_calls:
            return max(self.of(rank), self.job_high if rank is None else self.ranks_high.get(rank, self.job_high))
        return self.job if rank is None else self.ranks.get(rank, self.job)


def _same_calls(side: _Side) -> bool:
    return side.b.calls > 0 and abs(side.c.calls - side.b.calls) <= SAME_CALLS * side.b.calls


def _where(key: Key, b: NameTimes, c: NameTimes, added: bool, scales: Scales, *, told: int | None = None) -> _Side:
    """Job-wide figures, or one rank's where the change sits on some ranks only: the rank where it is largest, or
    `told`, the rank the same fact is already told on (the added work's rank for the names it counts), so one
    change is never placed on two ranks."""
    job = _Side(b.job_fig(key), c.job_fig(key), None)
    both = sorted(b.ranks.keys() & c.ranks.keys())
    if len(both) < 2:
        return job

    def delta(side: _Side) -> float:
        scale = scales.of(side.rank, _same_calls(side))
        return _figure(side.c, key[0], added) / scale - _figure(side.b, key[0], added)

    sides = [
        _Side(
            b.ranks[r].figs.get(key, Fig()).per_step(b.ranks[r].steps),
            c.ranks[r].figs.get(key, Fig()).per_step(c.ranks[r].steps),
            r,
        )
        for r in both
    ]
    top = max(sides, key=lambda s: abs(delta(s)))
    if abs(delta(top)) >= ONE_RANK * abs(delta(job)) and abs(delta(top)) >= MIN_DELTA_US:
        return next((s for s in sides if s.rank == told), top)
    return job


def name_changes(
    b: NameTimes,
    c: NameTimes,
    scales: Scales | None = None,
    *,
    faster: bool = False,
    told: dict[str, int] | None = None,
) -> list[TopChange]:
    """Every name whose time or calls per step differ (baseline `b`, candidate `c`), ranked at the baseline's op
    speed (candidate times over `scales`, the rank's where a change sits on one rank): the largest increase first,
    or with `faster` (the candidate's steps are faster) the largest decrease first. `told`: name key -> the rank a
    change of that name sits on when it sits on one rank (the added work's)."""
    scales = scales or Scales()
    told = told or {}
    changes = []
    for key in b.job.keys() | c.job.keys():
        added, removed = key not in b.job, key not in c.job
        site = added or removed  # a call site that is new, or gone: its whole time is the change
        at = _where(key, b, c, site, scales, told=told.get(key[1]))
        scale = scales.of(at.rank, _same_calls(at))
        b_us, c_us = _figure(at.b, key[0], site), _figure(at.c, key[0], site)
        delta = c_us - b_us
        if abs(delta) < MIN_DELTA_US and abs(at.c.calls - at.b.calls) < 1e-9 and abs(at.c.wait_us - at.b.wait_us) < 1:
            continue
        changes.append(
            TopChange(
                name=key[1],
                kind=key[0],
                change=ChangeKind.ADDED if added else ChangeKind.REMOVED if removed else ChangeKind.CHANGED,
                basis="inclusive" if site and key[0] in FRAMES else "self",
                rank=at.rank,
                baseline_us_per_step=b_us,
                candidate_us_per_step=c_us,
                delta_us_per_step=delta,
                at_equal_op_speed_delta_us_per_step=c_us / scale - b_us,
                inclusive_delta_us_per_step=at.c.incl_us - at.b.incl_us,
                wait_delta_us_per_step=at.c.wait_us - at.b.wait_us,
                baseline_count_per_step=at.b.calls,
                candidate_count_per_step=at.c.calls,
                count_delta=at.c.calls - at.b.calls,
            )
        )
    sign = -1.0 if faster else 1.0
    changes.sort(
        key=lambda t: (
            -round(sign * t.at_equal_op_speed_delta_us_per_step, 1),
            -sign * t.delta_us_per_step,
            -abs(t.count_delta),
            t.kind,
            t.name,
            t.rank or 0,
        )
    )
    return changes
