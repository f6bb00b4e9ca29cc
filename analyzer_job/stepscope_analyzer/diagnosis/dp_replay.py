"""What-if replay of a data-parallel job's steps: the step time if a slow rank ran like its peers. Pure.

Every rank runs its own work of a step (the step's phases less its wait on collectives: its own communication
counts, diagnosis.rank_costs) and then joins the others in the step's gradient collective, so a replayed step lasts
as long as its slowest rank's work. A slow rank running like its peers takes, each step, the median of the other
ranks' work that step; every slow rank running like its peers (the job's gain, diagnosis.replayed_gain), the median
of the ranks that are not slow. On a node whose ranks share an oversubscribed CPU (diagnosis.shared_cpu), the change
also takes CPU demand off the node, and every rank there is stretched that much less. As in diagnosis.replay, the
what-if is read as a difference: the recorded step less the mean replayed saving.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from stepscope_analyzer.diagnosis.rank_costs import RankSamples
from stepscope_analyzer.diagnosis.shared_cpu import busy_ranks, cpu_work, shared_saving
from stepscope_analyzer.diagnosis.stats import mean_interval
from stepscope_contract.report import RankReport, StepPhases, WhatIf

ALL_LIKE_PEERS = "all_like_peers"
"""the what-if of every slow rank running like its peers together: the job's gain"""


def _work(p: StepPhases) -> float:
    return p.data_loading + p.forward + p.backward + p.optimizer + p.other


def _saved(job: DpWork, changed: list[int]) -> list[float]:
    """Each step's saving with the `changed` ranks each taking the median of the unchanged ranks' work; on a busy
    node, the larger of that and the saving of the CPU demand the change takes off (shared_cpu.shared_saving)."""
    saved = []
    for t in range(job.steps):
        now = {r: w[t] for r, w in job.work.items()}
        others = [r for r in now if r not in changed] or list(now)
        like = float(np.median([now[r] for r in others]))
        plain = max(now.values()) - max({**now, **dict.fromkeys(changed, like)}.values())
        if job.busy:
            cpu = {r: c[t] for r, c in job.cpu.items()}
            like_cpu = float(np.median([cpu[r] for r in others]))
            plain = max(plain, shared_saving(now, cpu, changed, (like, like_cpu), node=job.node, busy=job.busy))
        saved.append(plain)
    return saved


def _replayed(job: DpWork, changed: list[int], step_us: float) -> WhatIf:
    """The what-if of the `changed` ranks each taking, every step, the median of the unchanged ranks' work."""
    many = len(changed) > 1
    return replayed_what_if(
        ALL_LIKE_PEERS if many else "like_peers",
        "every slow rank ran like its peers" if many else f"rank {changed[0]} ran like its peers",
        _saved(job, changed),
        step_us,
    )


def replayed_what_if(kind: str, change: str, saved: list[float], step_us: float) -> WhatIf:
    """A what-if from the replayed saving of each recorded step: the recorded step less the mean saving, with the
    saving's noise interval over the steps."""
    mean, low, high = mean_interval(saved)
    after = max(step_us - mean, 0.0)
    return WhatIf(
        kind=kind,
        change=change,
        step_us=round(after, 1),
        gain_us=round(step_us - after, 1),
        speedup=round(step_us / after, 3) if after > 0 else None,
        gain_low_us=round(low, 1),
        gain_high_us=round(high, 1),
    )


@dataclass(frozen=True)
class DpWork:
    """Each rank's work per recorded step as the replay takes it (every rank has `steps` of them)."""

    work: dict[int, list[float]]
    steps: int
    cpu: dict[int, list[float]] = field(default_factory=dict)
    """the same without CPU-contention stretches, for the ranks in `busy`"""
    node: dict[int, str | None] = field(default_factory=dict)
    busy: frozenset[int] = frozenset()
    """the ranks on nodes whose CPUs are oversubscribed (diagnosis.shared_cpu.busy_ranks)"""


def dp_work(ranks: list[RankReport], samples: list[RankSamples]) -> DpWork | None:
    """The ranks' work per recorded step, where every rank has the same recorded steps (None otherwise, or for one
    rank); `samples`: the ranks' per-step costs (diagnosis.rank_costs), whose communication each rank's work holds."""
    counts = {len(r.step_phases) for r in ranks}
    if len(counts) != 1 or 0 in counts or len(ranks) < 2:
        return None
    steps = counts.pop()
    own = {s.rank: s.costs["communication"].tolist() for s in samples if s.per_step}
    table = {}
    for r in ranks:
        comm = own.get(r.rank, [])
        comm = comm if len(comm) == steps else [0.0] * steps
        table[r.rank] = [_work(p) + c for p, c in zip(r.step_phases, comm, strict=True)]
    per_step = {s.rank: s for s in samples if s.per_step and s.rank in table and len(s.step_us) == steps}
    busy = busy_ranks(per_step.values()) if len(per_step) == len(table) else frozenset()
    if not busy:
        return DpWork(table, steps)
    cpu = {r: cpu_work(s, table[r]) for r, s in per_step.items()}
    return DpWork(table, steps, cpu, {r: s.machine for r, s in per_step.items()}, busy)


def dp_gain_of(job: DpWork) -> Callable[[list[int]], float]:
    """The mean replayed saving per step of any set of ranks running like the others (diagnosis.gain_shares)."""
    return lambda changed: float(np.mean(_saved(job, [r for r in changed if r in job.work])))


def dp_what_ifs(job: DpWork | None, slow: list[int], step_us: float) -> list[WhatIf]:
    """A `like_peers` what-if for each slow rank, and an `all_like_peers` one for all of them together where there
    are several (none without a job of equal recorded steps)."""
    if job is None or step_us <= 0:
        return []
    changed = [s for s in dict.fromkeys(slow) if s in job.work]
    out = [_replayed(job, [rank], step_us) for rank in changed]
    if len(changed) > 1:
        out.append(_replayed(job, changed, step_us))
    return out
