"""Synthetic step series for the trigger tests: a synchronous data-parallel job on a noisy shared machine.

Every rank's step lasts as long as the job's (the ranks meet in the gradient all-reduce), with log-normal jitter,
bursts three times as long, and per-rank noise in how much of the step is the rank's own (outside backward()).
A planted straggler adds its extra time to its own part; the others wait it out inside backward().
"""

from __future__ import annotations

import math
import random

from stepscope_contract.step_telemetry import RankSteps


def job(
    seed: int,
    steps: int = 300,
    world: int = 4,
    step_ms: float = 60.0,
    sigma: float = 0.25,
    bursts: float = 0.05,
    slow_rank: int = -1,
    slow_ms: float = 0.0,
    slow_from: int = 0,
    slow_steps: int | None = None,
    job_slowdown: float = 1.0,
    since_last: float = 0.1,
    profiled: tuple[int, ...] = (),
) -> list[RankSteps]:
    """`world` ranks' last `steps` steps; from step `slow_from` (for `slow_steps` steps, or to the end) rank
    `slow_rank` takes `slow_ms` longer and the whole job's step is `job_slowdown` times longer."""
    rnd = random.Random(seed)
    end = steps if slow_steps is None else slow_from + slow_steps
    common = []
    for i in range(steps):
        base = step_ms * math.exp(rnd.gauss(0.0, sigma)) * (3.0 if rnd.random() < bursts else 1.0)
        if slow_from <= i < end:
            base *= job_slowdown
        common.append(base)
    out = []
    for rank in range(world):
        durations, backward = [], []
        for i, base in enumerate(common):
            slowed = slow_rank >= 0 and slow_from <= i < end
            duration = (base + (slow_ms if slowed else 0.0)) * math.exp(rnd.gauss(0.0, 0.03))
            own = base * min(0.9, max(0.1, rnd.gauss(0.45, 0.1)))  # the rank's own work: host, forward, optimizer
            if slowed and rank == slow_rank:
                own += slow_ms  # the others wait this out inside backward()
            own = min(own, duration)
            durations.append(duration)
            backward.append(duration - own)
        out.append(
            RankSteps(
                rank=rank,
                world_size=world,
                steps_total=steps,
                seconds_since_last_step=since_last,
                duration_ms=durations,
                backward_ms=backward,
                profiled=[i in profiled for i in range(steps)],
            )
        )
    return out
