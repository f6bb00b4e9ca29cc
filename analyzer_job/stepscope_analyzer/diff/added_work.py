"""The added work: what the candidate runs that the baseline does not, as evidence beside the steps' shift. Pure.

On each rank held by both sides: the self time per step of the names the candidate added (ops, kernels, regions,
Python frames; collectives are left out, their time is mostly waiting), plus, for ops it calls more often, the
extra calls' time from three estimates, each too high or too low in its own case: the extra calls at the
candidate's mean time per call (too high when the new calls are smaller than the old); the candidate's time less the
baseline's (wrong by as much as the machine's speed moved between the recordings); on CPU ranks, the share of the
op's time that its call floors grew by (RankReport.call_floors: each call's least own time over the steps, which
waiting for a CPU does not raise; too high when contention stretched the old calls more). With call floors, their
median; without, the smaller of the first two. Self times do not overlap on a thread,
so the sum is time the rank's steps spent on new work. The job's figure is the rank with the most (a synchronous
step waits for its slowest rank).

Its share is taken against the rest of the candidate's median job step (the step less the added work): both come
from the same recording, so the machine's speed, whatever it was, is in both and cancels, and no speed figure
can explain the added work away. The interval is that of the median step (distribution-free,
order statistics): its lower end takes the longest step the data allow.
A name below the smallest time the baseline's list of its kind holds may have been cut from that list (a
report.json keeps its top names only): it is not counted as added.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from stepscope_analyzer.diff.name_deltas import Fig, Key, NameTimes, RankNames
from stepscope_contract.diff import AddedWork

WORK_KINDS = frozenset({"cpu_op", "kernel", "memory", "runtime", "python", "user_annotation"})
SAME_CALLS = 0.01
"""calls per step may grow by this share (and by MIN_GROWN_CALLS) before the extra calls count as added work"""
MIN_GROWN_CALLS = 0.25
MIN_US = 1.0
"""added work below this per step is none"""
NAMES = 5


def grown(key: Key, bf: Fig, cf: Fig, b: RankNames, c: RankNames) -> float:
    """The time per step of the extra calls of an op called more often (module docstring)."""
    estimates = [(cf.calls - bf.calls) * cf.self_us / cf.calls, cf.self_us - bf.self_us]
    b_floor, c_floor = b.call_floors.get(key[1], 0.0), c.call_floors.get(key[1], 0.0)
    if b_floor > 0 and c_floor > 0:
        estimates.append(cf.self_us * (1.0 - b_floor / c_floor))
        return sorted(estimates)[1]
    return min(estimates)


def rank_added(b: RankNames, c: RankNames) -> dict[Key, float]:
    """µs per step each name adds on one rank."""
    out: dict[Key, float] = {}
    for key, total in c.figs.items():
        if key[0] not in WORK_KINDS:
            continue
        cf = total.per_step(c.steps)
        before = b.figs.get(key)
        if before is None:
            floor = b.floor.get(key[0])
            if floor is not None and cf.incl_us < floor / max(b.steps, 1):
                continue
            own = cf.self_us
        else:
            bf = before.per_step(b.steps)
            extra = cf.calls - bf.calls
            if extra <= max(SAME_CALLS * bf.calls, MIN_GROWN_CALLS) or cf.calls <= 0:
                continue
            own = grown(key, bf, cf, b, c)
        if own > 0:
            out[key] = own
    return out


def median_interval(log_us: list[float], confidence: float) -> tuple[float, float] | None:
    """Distribution-free interval of a median (order statistics, normal approximation of the binomial)."""
    n = len(log_us)
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    k = math.floor(n / 2.0 - z * math.sqrt(n) / 2.0)
    if k < 1:
        return None
    s = sorted(log_us)
    return s[k - 1], s[n - k]


def added_work(b: NameTimes, c: NameTimes, candidate_log_us: list[float], confidence: float) -> AddedWork | None:
    """The added work on the rank with the most; None when the candidate added none (or has no step)."""
    best: tuple[float, int, dict[Key, float]] | None = None
    for r in sorted(b.ranks.keys() & c.ranks.keys()):
        names = rank_added(b.ranks[r], c.ranks[r])
        total = sum(names.values())
        if best is None or total > best[0]:
            best = (total, r, names)
    if best is None or best[0] < MIN_US or not candidate_log_us:
        return None
    total, rank, names = best
    step = math.exp(sorted(candidate_log_us)[len(candidate_log_us) // 2])
    interval = median_interval(candidate_log_us, confidence)

    def pct(step_us: float) -> float:
        return 100.0 * total / max(step_us - total, MIN_US)

    top = sorted(names.items(), key=lambda kv: -kv[1])[:NAMES]
    return AddedWork(
        us_per_step=total,
        rank=rank,
        pct=pct(step),
        ci_low_pct=pct(math.exp(interval[1])) if interval else None,
        ci_high_pct=pct(math.exp(interval[0])) if interval else None,
        names=[name for (_, name), _ in top],
    )
