"""The job's step numbers, defined once: step time (median, mean and p90 over every analysed step of every rank),
the step time expected without the slow ranks' excess, and the speedup that fixing them would bring. Pure.

Stragglers overlap: the job waits for the slowest one, so fixing all of them removes the largest excess. A rank
that stalls intermittently does not move the median step (its stalls are a few long steps), so when one does, the
expected step and the speedup are taken from the mean step instead, which its stalls are part of."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stepscope_contract.report import RankReport, SlowRank


@dataclass(frozen=True)
class StepNumbers:
    median_step_us: float = 0.0
    p90_step_us: float = 0.0
    expected_step_us: float | None = None
    estimated_speedup: float | None = None
    mean_step_us: float = 0.0
    from_mean: bool = False
    """the expected step and the speedup are relative to the mean step (a slow rank stalls intermittently)"""
    window_us: float = 0.0
    """set when no rank has step spans (no ProfilerStep#N): the median recorded window, which a slow rank's excess
    is then measured over (the speedup is relative to it; there is no step time)"""


def step_numbers(ranks: list[RankReport], slow: list[SlowRank]) -> StepNumbers:
    steps = [d for r in ranks for d in r.steps.durations_us]
    if not steps:
        steps = [r.steps.median_us for r in ranks if r.steps.median_us > 0]
    if not steps:
        return _window_numbers(ranks, slow)
    arr = np.asarray(steps, dtype=np.float64)
    med = float(np.median(arr))
    p90 = float(np.percentile(arr, 90))
    mean = float(np.mean(arr))
    gains = [s.excess_us for s in slow if s.excess_us > 0]
    if not gains or med <= 0:
        return StepNumbers(med, p90, mean_step_us=mean)
    from_mean = any(s.stalled_steps for s in slow if s.excess_us > 0)
    base = mean if from_mean else med
    expected = max(base - max(gains), 0.1 * base)
    return StepNumbers(med, p90, expected, base / expected, mean, from_mean)


def _window_numbers(ranks: list[RankReport], slow: list[SlowRank]) -> StepNumbers:
    """Traces without step spans: the recorded window stands for the step in the speedup; no step time."""
    windows = [r.window_us for r in ranks if r.window_us > 0]
    if not windows:
        return StepNumbers()
    window = float(np.median(windows))
    gains = [s.excess_us for s in slow if s.excess_us > 0]
    if not gains:
        return StepNumbers(window_us=window)
    expected = max(window - max(gains), 0.1 * window)
    return StepNumbers(estimated_speedup=window / expected, window_us=window)


def per_step_words(numbers: StepNumbers) -> str:
    """What a slow rank's excess is measured over: 'per step', or 'over the recorded window' without steps."""
    return "over the recorded window" if numbers.window_us > 0 else "per step"


def slowdown_sentence(numbers: StepNumbers, rank_text: str) -> str:
    """'steps take 77.0 ms; without rank 2's excess ~16.0 ms (~4.8x faster)'; with an intermittent stall 'steps
    take 111.0 ms on average (median 60.1 ms); without rank 2's excess ...'; without step spans 'the recorded
    window takes 640.2 ms (the traces have no ProfilerStep#N spans: no step time); ...'."""
    if numbers.window_us > 0:
        text = (
            f"the recorded window takes {numbers.window_us / 1000:,.1f} ms (the traces have no ProfilerStep#N spans: "
            "no step time; call prof.step() at every step for per-step figures)"
        )
        if numbers.estimated_speedup is not None:
            text += f"; without {rank_text} excess it would be ~{numbers.estimated_speedup:.2f}x faster"
        return text
    if numbers.expected_step_us is None or numbers.estimated_speedup is None:
        return f"steps take {numbers.median_step_us / 1000:,.1f} ms"
    now = f"{numbers.median_step_us / 1000:,.1f} ms"
    if numbers.from_mean:
        now = f"{numbers.mean_step_us / 1000:,.1f} ms on average (median {now})"
    return (
        f"steps take {now}; without {rank_text} excess they would take "
        f"~{numbers.expected_step_us / 1000:,.1f} ms (~{numbers.estimated_speedup:.2f}x faster)"
    )
