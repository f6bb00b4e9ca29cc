"""Each recorded step's phases in time order: the timeline a person reads, from the same phase sets as the step's
phase totals (step_phases); on GPU traces, the phases inside the step's GPU window, stretched to the step. Pure.

Within a step, every instant holds one phase; the instants no named phase holds are `other`. Neighbouring stretches
of one phase are joined, and stretches shorter than MIN_SHARE of the step go to their longer neighbour, so that a
step keeps at most MAX_SPANS stretches (the share doubles until it does). Stretches of
`communication_wait` are labelled with the collective in flight at their middle, stretches of `other` with the
innermost user region (record_function) of the training thread there, if any.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses import interval_kernels
from stepscope_analyzer.analyses.phase_names import COMM, STEP, name_mask
from stepscope_analyzer.analyses.sorted_values import distinct
from stepscope_analyzer.analyses.step_phases import HOST_CATS, PHASES, PhaseSets, StepWindows
from stepscope_analyzer.parse import TraceColumns
from stepscope_contract.report import PhaseSpan

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

MIN_SHARE = 0.01
MAX_SPANS = 32
NAMED = tuple(p for p in PHASES if p != "other")
OTHER = PHASES.index("other")


def _pieces(sets: PhaseSets, lo: float, hi: float) -> tuple[F64, F64, I64]:
    """The named phases' stretches inside [lo, hi), sorted by start."""
    starts, ends, kinds = [], [], []
    for name in NAMED:
        s, e = sets.sets.get(name, (np.empty(0), np.empty(0)))
        a, b = int(np.searchsorted(e, lo, side="right")), int(np.searchsorted(s, hi, side="left"))
        if b > a:
            starts.append(np.maximum(s[a:b], lo))
            ends.append(np.minimum(e[a:b], hi))
            kinds.append(np.full(b - a, PHASES.index(name), dtype=np.int64))
    if not starts:
        return np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    s_all, e_all, k_all = np.concatenate(starts), np.concatenate(ends), np.concatenate(kinds)
    order = np.argsort(s_all, kind="stable")
    return s_all[order], e_all[order], k_all[order]


def _runs(lo: float, hi: float, s: F64, e: F64, k: I64) -> tuple[F64, F64, I64]:
    """The (starts, ends, phases) covering [lo, hi): the named stretches and `other` in their gaps, neighbours joined.

    Vectorised: a stretch starts where the ones before it end at the latest (overlaps go to the earlier), the gaps
    between are `other`, and runs of one phase are joined."""
    if s.size == 0:
        if hi > lo:
            return np.array([lo]), np.array([hi]), np.array([OTHER], dtype=np.int64)
        return np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    reached = np.maximum.accumulate(np.maximum(e, lo))  # how far the stretches up to each one reach
    before = np.concatenate(([lo], reached[:-1]))
    start = np.maximum(s, before)
    gap = s > before
    n = s.size
    starts = np.empty(2 * n + 1)
    ends = np.empty(2 * n + 1)
    kinds = np.empty(2 * n + 1, dtype=np.int64)
    starts[0:-1:2], ends[0:-1:2], kinds[0:-1:2] = before, np.where(gap, s, before), OTHER  # the gap before each
    starts[1::2], ends[1::2], kinds[1::2] = start, e, k
    starts[-1], ends[-1], kinds[-1] = reached[-1], hi, OTHER  # after the last
    keep = ends > starts
    starts, ends, kinds = starts[keep], ends[keep], kinds[keep]
    if starts.size == 0:
        return starts, ends, kinds
    first = np.concatenate(([True], kinds[1:] != kinds[:-1]))  # the first stretch of each run of one phase
    heads = np.flatnonzero(first)
    tails = np.concatenate((heads[1:], [kinds.size])) - 1
    return starts[heads], ends[tails], kinds[heads]


def _with_other(lo: float, hi: float, s: F64, e: F64, k: I64) -> list[list[float]]:
    """_runs as [start, end, phase] lists."""
    return _as_lists(*_runs(lo, hi, s, e, k))


def _as_lists(starts: F64, ends: F64, kinds: I64) -> list[list[float]]:
    return [[a, b, c] for a, b, c in zip(starts.tolist(), ends.tolist(), kinds.tolist(), strict=True)]


def _pass(pieces: list[list[float]], least: float) -> list[list[float]]:
    """One pass: each stretch shorter than `least` goes to its longer neighbour; neighbours of one phase join."""
    kept: list[list[float]] = []
    carry: float | None = None  # the start of short stretches handed on to the next one
    for i, original in enumerate(pieces):
        piece = [carry if carry is not None else original[0], original[1], original[2]]
        carry = None
        short = piece[1] - piece[0] < least
        nxt = pieces[i + 1] if i + 1 < len(pieces) else None
        if short and kept and (nxt is None or kept[-1][1] - kept[-1][0] >= nxt[1] - nxt[0]):
            kept[-1][1] = piece[1]
        elif short and nxt is not None:
            carry = piece[0]
        elif kept and kept[-1][2] == piece[2]:
            kept[-1][1] = piece[1]
        else:
            kept.append(piece)
    return kept


def _coarsen(runs: tuple[F64, F64, I64], step_us: float) -> list[list[float]]:
    """Stretches shorter than MIN_SHARE of the step folded into a neighbour, then coarser until MAX_SPANS fit (each
    pass by the native kernel where it is built, else by _pass: the same stretches)."""
    share = MIN_SHARE
    while True:
        native = interval_kernels.coarsen_pass(*runs, share * step_us)
        if native is None:
            return _coarsen_lists(_as_lists(*runs), step_us, share)
        runs = native
        if runs[0].size <= MAX_SPANS:
            return _as_lists(*runs)
        share *= 2


def _coarsen_lists(pieces: list[list[float]], step_us: float, share: float = MIN_SHARE) -> list[list[float]]:
    """_coarsen by the Python loop, from the pass at `share` on."""
    while True:
        pieces = _pass(pieces, share * step_us)
        if len(pieces) <= MAX_SPANS:
            return pieces
        share *= 2


class _Labels:
    """Names in flight at an instant: collectives on any thread, user regions on the training thread."""

    def __init__(self, ev: TraceColumns, steps: StepWindows) -> None:
        host = ev.cat_mask(*HOST_CATS) & (ev.stream == -1)
        comm = np.flatnonzero(host & name_mask(ev, COMM))
        region = host & ev.cat_mask("user_annotation") & (ev.pid == steps.pid) & (ev.tid == steps.tid)
        region &= ~name_mask(ev, STEP)
        regions = np.flatnonzero(region)
        self.ev = ev
        ids = distinct(ev.name_id[comm])  # the names once each, not every row's
        c10d = [i for i in ids.tolist() if ev.names[i].startswith("c10d::")]
        self.comm = comm[~np.isin(ev.name_id[comm], c10d)] if c10d else comm
        self.regions = regions

    def at(self, rows: npt.NDArray[np.int64], t: float) -> str:
        """The innermost (shortest) of `rows` running at `t`, '' if none."""
        if rows.size == 0:
            return ""
        ts, dur = self.ev.ts[rows], self.ev.dur[rows]
        inside = np.flatnonzero((ts <= t) & (ts + dur >= t))
        if inside.size == 0:
            return ""
        best = int(rows[inside[int(np.argmin(dur[inside]))]])
        return str(self.ev.names[int(self.ev.name_id[best])])

    def label(self, phase: int, t: float) -> str:
        if PHASES[phase] == "communication_wait":
            return self.at(self.comm, t)
        if phase == OTHER:
            return self.at(self.regions, t)
        return ""


def step_spans(
    ev: TraceColumns, steps: StepWindows, sets: PhaseSets, windows: tuple[F64, F64] | None = None
) -> list[list[PhaseSpan]]:
    """Per step, its phases in time order (see the module docstring); with `windows` (GPU traces: each step's GPU
    window, step_phases.gpu_phase_sets), the phases inside each window, stretched to the step's duration as the
    step's phase totals are."""
    labels = _Labels(ev, steps)
    starts, ends = windows if windows is not None else (steps.start, steps.end)
    out: list[list[PhaseSpan]] = []
    for i, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        dur = float(steps.end[i] - steps.start[i])
        factor = dur / (hi - lo) if hi > lo else 0.0
        pieces = _coarsen(_runs(lo, hi, *_pieces(sets, lo, hi)), hi - lo) if hi > lo else []
        out.append(
            [
                PhaseSpan(
                    phase=PHASES[int(kind)],
                    start_us=round((start - lo) * factor, 1),
                    end_us=round((end - lo) * factor, 1),
                    label=labels.label(int(kind), (start + end) / 2),
                )
                for start, end, kind in pieces
            ]
        )
    return out
