"""The gain estimate in words: what a step would take if the slow ranks matched the others. Pure.

The figures are the diagnosis's (Diagnosis.median_step_us, expected_step_us, estimated_speedup), computed once
there consistently with the slowdown; this module only words them, and says less when they are absent.
"""

from __future__ import annotations

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Diagnosis


def step_duration(us: float) -> str:
    """A step time, rounded as a person says it: '850 µs', '7.4 ms', '77 ms', '1.24 s'."""
    if us >= 1_000_000:
        return f"{us / 1_000_000:.2f} s"
    if us >= 10_000:
        return f"{us / 1_000:.0f} ms"
    if us >= 1_000:
        return f"{us / 1_000:.1f} ms"
    return f"{us:.0f} µs"


def gain_sentence(d: Diagnosis) -> str | None:
    """'If rank 2 matched the others, a step would take ~16 ms instead of 77 ms (4.8x faster).' (on average, from
    the mean step, when a slow rank stalls intermittently), or the job's step time alone when there is no
    estimate, or None when the diagnosis has neither."""
    slow = sorted({s.rank for s in d.slow_ranks if s.cause not in STANDSTILL})
    median, expected, speedup = d.median_step_us, d.expected_step_us, d.estimated_speedup
    stalls = any(s.stalled_steps for s in d.slow_ranks) and d.mean_step_us > 0
    now = d.mean_step_us if stalls else median  # the expected step is relative to the mean when a rank stalls
    if slow and now > 0 and expected is not None and expected > 0 and speedup is not None and speedup > 1.0:
        who = f"rank {slow[0]}" if len(slow) == 1 else f"ranks {format_rank_set(slow)}"
        factor = f"{speedup:.2f}" if speedup < 10 else f"{speedup:.0f}"  # as the verdict says it
        average = " on average" if stalls else ""
        return (
            f"If {who} matched the others, a step would take ~{step_duration(expected)}{average} instead of "
            f"{step_duration(now)} ({factor}x faster)."
        )
    if median > 0:
        p90 = f", p90 {step_duration(d.p90_step_us)}" if d.p90_step_us > 0 else ""
        return f"A step takes {step_duration(median)} (median over ranks and steps{p90})."
    return None
