"""Self time: an event's duration less what its direct children on the same thread cover; nesting is per thread,
a child overrunning its parent is clipped, the self times of a thread add up to its busy time, and random nestings
give what a stack walk gives; the interval kernels give numpy's self times to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.analyses import interval_kernels
from stepscope_analyzer.analyses.self_times import self_durations, self_time_by_name

pytestmark = pytest.mark.unit


def _self(rows: list[tuple[int, float, float]]) -> list[float]:
    """rows: (tid, ts, dur), all on pid 1."""
    tid = np.asarray([r[0] for r in rows], dtype=np.int64)
    ts = np.asarray([r[1] for r in rows], dtype=np.float64)
    dur = np.asarray([r[2] for r in rows], dtype=np.float64)
    pid = np.ones_like(tid)
    return self_durations(pid, tid, ts, dur, np.arange(len(rows))).tolist()


def test_a_frame_keeps_only_what_its_children_do_not_cover() -> None:
    # <module> [0, 100) > forward [10, 90) > (aten::mm [20, 50), aten::tanh [50, 60)); then aten::add [92, 98)
    rows = [(1, 0, 100), (1, 10, 80), (1, 20, 30), (1, 50, 10), (1, 92, 6)]
    assert _self(rows) == [100 - 80 - 6, 80 - 30 - 10, 30, 10, 6]
    assert sum(_self(rows)) == 100  # the thread's busy time, counted once


def test_threads_nest_apart_and_overruns_are_clipped() -> None:
    rows = [(1, 0, 50), (2, 10, 20), (1, 40, 20)]  # thread 2's op is not thread 1's child; the last overruns
    assert _self(rows) == [40, 20, 20]


def test_rows_come_back_in_their_own_order_and_sum_by_name() -> None:
    rows = [(1, 20, 30), (1, 0, 100)]  # the child listed first
    own = _self(rows)
    assert own == [30, 70]
    by_name = self_time_by_name(np.asarray([1, 0], dtype=np.int32), np.asarray(own), 3)
    assert by_name.tolist() == [70, 30, 0]


def _stack_walk(tid: list[int], ts: list[float], dur: list[float]) -> list[float]:
    """The reference: one stack per thread, events by start (the longer first)."""
    order = sorted(range(len(ts)), key=lambda i: (tid[i], ts[i], -dur[i]))
    own = list(dur)
    stack: list[int] = []
    current = None
    for i in order:
        if tid[i] != current:
            stack, current = [], tid[i]
        while stack and ts[stack[-1]] + dur[stack[-1]] <= ts[i]:
            stack.pop()
        if stack:
            p = stack[-1]
            own[p] -= min(ts[i] + dur[i], ts[p] + dur[p]) - ts[i]
        if dur[i] > 0:
            stack.append(i)
    return [max(x, 0.0) for x in own]


def _nested(rng: np.random.Generator, lo: float, hi: float, depth: int, out: list[tuple[float, float]]) -> None:
    t = lo
    while depth < 6 and t < hi:
        start = t + float(rng.integers(0, 5))
        end = min(hi, start + float(rng.integers(0, 40)))
        if end < start:
            break
        out.append((start, end - start))
        _nested(rng, start, end, depth + 1, out)
        t = end + float(rng.integers(0, 3))


@pytest.mark.parametrize("seed", range(10))
def test_the_same_as_a_stack_walk_on_random_nesting(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tids, starts, lengths = [], [], []
    for t in (1, 2, 3):
        events: list[tuple[float, float]] = []
        _nested(rng, 0.0, 500.0, 0, events)
        tids += [t] * len(events)
        starts += [s for s, _ in events]
        lengths += [d for _, d in events]
    shuffle = rng.permutation(len(starts))
    tid = np.asarray(tids, dtype=np.int64)[shuffle]
    ts = np.asarray(starts)[shuffle]
    dur = np.asarray(lengths)[shuffle]
    got = self_durations(np.ones_like(tid), tid, ts, dur, np.arange(ts.size))
    assert got.tolist() == pytest.approx(_stack_walk(tid.tolist(), ts.tolist(), dur.tolist()))


def _random_events(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """Nesting, partial overlaps (clock rounding), ties, zero and fractional lengths, several threads."""
    tid = rng.integers(0, 3, n).astype(np.int64)
    ts = np.round(rng.random(n) * 1000.0, int(rng.integers(0, 3)))
    dur = np.where(rng.random(n) < 0.1, 0.0, np.round(rng.exponential(60.0, n), 1))
    return tid, ts, dur


@pytest.mark.skipif(not interval_kernels.AVAILABLE, reason="the native kernels are not built")
@pytest.mark.parametrize("seed", range(40))
def test_the_kernel_gives_numpy_s_self_times_to_the_bit(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    tid, ts, dur = _random_events(rng, int(rng.integers(1, 3000)))
    rows = rng.permutation(ts.size)[: max(1, ts.size // 2 + 1)]
    native = self_durations(np.ones_like(tid), tid, ts, dur, rows)
    monkeypatch.setattr(interval_kernels, "_children", None)
    python = self_durations(np.ones_like(tid), tid, ts, dur, rows)
    assert native.tobytes() == python.tobytes()


def test_the_kernel_leaves_numbers_that_are_not_finite_to_numpy() -> None:
    starts, ends = np.array([0.0, np.inf]), np.array([5.0, np.inf])
    own = ends - starts
    assert not interval_kernels.children_cover(starts, ends, own)
