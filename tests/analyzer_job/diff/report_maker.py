"""Synthetic contract Reports for the diff's unit tests: ranks with given step durations, functions and phases."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from stepscope_contract.report import Bottleneck, Diagnosis, KernelStat, RankReport, Report, StepPhases, StepStats


def steps(durations: list[float]) -> StepStats:
    s = sorted(durations)
    n = len(s)
    median = (s[(n - 1) // 2] + s[n // 2]) / 2 if n else 0.0
    return StepStats(
        count=n,
        median_us=median,
        mean_us=sum(s) / n if n else 0.0,
        min_us=s[0] if n else 0.0,
        max_us=s[-1] if n else 0.0,
        durations_us=list(durations),
    )


def rank(
    r: int,
    durations: list[float],
    *,
    functions: dict[str, tuple[float, int]] | None = None,
    kernels: dict[str, tuple[float, int]] | None = None,
    phases: StepPhases | None = None,
) -> RankReport:
    """functions/kernels: name -> (total µs over the recorded steps, calls)."""
    return RankReport(
        rank=r,
        world_size=None,
        steps=steps(durations),
        top_functions=[
            Bottleneck(name=n, category="cpu_op", count=c, total_us=t, mean_us=t / max(c, 1))
            for n, (t, c) in (functions or {}).items()
        ],
        top_kernels=[
            KernelStat(
                name=n, kernel_type="COMPUTATION", count=c, sum_us=t, mean_us=t / c, max_us=t, min_us=0, stddev=0
            )
            for n, (t, c) in (kernels or {}).items()
        ],
        phases=phases,
    )


def report(ranks: list[RankReport], *, world_size: int | None = None) -> Report:
    return Report(
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        world_size=world_size if world_size is not None else len(ranks),
        ranks=ranks,
        diagnosis=Diagnosis(verdict="synthetic"),
    )


def noisy_job(
    *, world: int = 4, n_steps: int = 12, step_us: float = 20_000.0, noise: float = 0.10, seed: int = 0
) -> Report:
    """A synchronous job: each step has one length (log-normal noise) that every rank sees, plus a little jitter."""
    rng = random.Random(seed)
    job = [step_us * rng.lognormvariate(0.0, noise) for _ in range(n_steps)]
    ranks = [rank(r, [d * rng.uniform(0.99, 1.01) for d in job]) for r in range(world)]
    return report(ranks)
