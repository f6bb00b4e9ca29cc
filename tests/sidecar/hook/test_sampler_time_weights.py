"""The hook's Python stack sampler counts time, not samples: a thread that spends as long in a pure-Python CPU loop
as it spends asleep gets about as many counts in the loop as in the sleep, although the sampler, which needs the
GIL to take a sample, reaches the loop only when the loop hands the GIL over (every switch interval).

A long switch interval stands for the late handover a process starved of CPU gives the sampler: it makes the gap
between samples in the loop several sampling periods long on a quiet machine and a loaded one alike. The band is
wide (the sampler sees a phase change only at its next sample), and the expected share is the time the thread
itself measured in each phase, so a machine that stretches the phases does not move the bar."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from stepscope_hook._sampler import StackSampler

pytestmark = pytest.mark.unit

HZ = 100
PHASE_S = 0.15
CYCLES = 8
SWITCH_S = 0.02  # two sampling periods: the loop hands the GIL to the sampler at most every 20 ms


def python_loop(seconds: float) -> int:
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def asleep(seconds: float) -> None:
    time.sleep(seconds)


def run_phases(sampler: StackSampler) -> tuple[float, float]:
    """CYCLES times a loop and a sleep of PHASE_S each while the sampler runs; the seconds spent in each."""
    looped = slept = 0.0
    sampler.start()
    try:
        for _ in range(CYCLES):
            t0 = time.monotonic()
            python_loop(PHASE_S)
            t1 = time.monotonic()
            asleep(PHASE_S)
            looped += t1 - t0
            slept += time.monotonic() - t1
    finally:
        sampler.stop()
    return looped, slept


def counted(sampler: StackSampler, function: str) -> int:
    """The counts of the stacks whose innermost frame of this module is `function`."""
    out = 0
    for line in sampler.folded(steps=1).splitlines()[1:]:
        stack, n = line.rsplit(" ", 1)
        ours = [f for f in stack.split(";") if "test_sampler_time_weights.py" in f]
        if ours and ours[-1].startswith(function + " ("):
            out += int(n)
    return out


def test_a_python_loop_that_holds_the_gil_is_counted_by_the_time_it_takes() -> None:
    sampler = StackSampler(HZ, threading.get_ident())
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_S)
    try:
        looped, slept = run_phases(sampler)
    finally:
        sys.setswitchinterval(before)
    in_loop, in_sleep = counted(sampler, "python_loop"), counted(sampler, "asleep")
    assert in_loop and in_sleep, sampler.folded(steps=1)
    share, expected = in_loop / (in_loop + in_sleep), looped / (looped + slept)
    detail = f"loop {in_loop}, sleep {in_sleep} counts; {sampler.samples} samples, {sampler.ticks} ticks"
    assert abs(share - expected) < 0.12, f"the loop's share {share:.2f}, its time's {expected:.2f} ({detail})"
    # the loop's samples came further apart than a period and each counts the periods it stands for
    assert sampler.ticks > 1.15 * sampler.samples, detail
    window_periods = (sampler.stopped_at - sampler.started_at) * HZ
    assert 0.8 * window_periods <= sampler.ticks <= window_periods + 1, detail  # the counts add up to the window
