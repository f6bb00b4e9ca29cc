"""Per rank and per recorded step, the costs the diagnosis compares, and the time each step waits for other ranks.
Pure.

From each step's phases (RankReport.step_phases, the same decomposition the report shows):
- compute = forward + backward + optimizer;
- host = data_loading + other (time outside the step's work: input pipeline, plain Python, logging, GC);
- on CPU ranks both are also taken without the stretches of waiting for a CPU (RankReport.step_dilation): that
  is what the test compares (on a shared CPU the scheduler stretches some rank's work for many steps in a row);
  the wall-clock figures are what the evidence and the gain quote. The correction is not exact: a share of the
  stretch it took out may remain (15% where the stretches were inferred from op calls; 5% where the hook measured
  the training thread's CPU wait, whose only error is sharing a step's wait out over its phases evenly), and the
  test's noise is at least that residual;
- blocked = communication_wait: time the step is blocked in collectives. Collectives end on every rank when the
  last rank arrives, so the rank that arrives last is blocked the least, and only for the transfer itself. The
  wait for other ranks is estimated as what each rank is blocked beyond the least-blocked rank (its median), and
  marked estimated; the rest is the rank's own communication.
A rank without step phases (a trace without ProfilerStep spans) contributes one sample per cost, from its whole
window divided by its step count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_contract.report import Collective, RankReport, StepPhases

F64 = npt.NDArray[np.float64]
COSTS = ("compute", "host", "communication")
INFERRED_RESIDUAL = 0.15
"""share of an inferred CPU-contention stretch that may remain in the corrected samples"""
MEASURED_RESIDUAL = 0.05
"""the same where the training thread's CPU wait was measured (RankReport.step_cpu_wait)"""


@dataclass(frozen=True)
class RankSamples:
    rank: int
    node: str | None
    step_us: F64
    costs: dict[str, F64]
    """wall-clock µs per step"""
    tested: dict[str, F64]
    """the same with CPU-contention stretches taken out (wall / the step's dilation): what the test compares"""
    wait: F64
    phases: dict[str, F64]
    per_step: bool
    """False when the rank had no per-step phases (one sample from whole-window totals)"""
    residual_share: float = INFERRED_RESIDUAL
    """share of the contention stretch taken out of `tested` that may remain in it"""
    numbers: tuple[int, ...] = ()
    """each sample's step number (ProfilerStep#N), where every step is numbered"""
    ops_outside: F64 | None = None
    """µs per step of tensor ops outside the step's work (RankReport.step_ops_outside_work), where measured"""
    machine: str | None = None
    """the node the rank ran on, else the host name its trace records (None: neither is known)"""

    def corrected(self, cost: str) -> bool:
        """Whether this cost's tested samples had CPU-contention stretches taken out (they differ from wall-clock)."""
        return not np.array_equal(self.tested[cost], self.costs[cost])

    def residual_us(self, cost: str) -> float:
        """µs per step of contention stretch that may remain in this cost's tested samples (its median)."""
        return self.residual_share * float(np.median(self.costs[cost] - self.tested[cost]))

    @property
    def steps(self) -> int:
        return int(self.step_us.size)


def _phase_arrays(rows: list[StepPhases]) -> dict[str, F64]:
    keys = StepPhases.model_fields
    return {k: np.asarray([getattr(p, k) for p in rows], dtype=np.float64) for k in keys}


def _window_phases(r: RankReport) -> tuple[F64, dict[str, F64]]:
    """One sample from whole-window totals, for ranks without per-step phases."""
    n = float(r.steps.count) if r.steps.count > 0 else 1.0
    window = max(r.kernel_time, r.window_us, r.compute_time + r.non_compute_time + r.idle_time)
    step = r.steps.median_us if r.steps.count > 0 and r.steps.median_us > 0 else window / n
    comm = r.communication_time / n
    compute = r.compute_time / n
    host = max(r.idle_time, r.host_gap_time, r.host_time) / n
    one = {
        "data_loading": 0.0,
        "forward": compute,
        "backward": 0.0,
        "optimizer": 0.0,
        "communication_wait": comm,
        "other": host,
    }
    return np.asarray([step]), {k: np.asarray([v]) for k, v in one.items()}


def wait_is_measured(ranks: list[RankReport]) -> bool:
    """True when a summary carries a direct measure of its wait (not the cross-rank estimate)."""
    return any(r.collective_wait_time > 0 and not r.collective_wait_estimated for r in ranks)


def _measured_wait(r: RankReport, blocked: F64) -> F64:
    """A rank's measured wait over the window, shared out over its steps as their blocked time is."""
    total = float(blocked.sum())
    if total <= 0:
        return np.zeros_like(blocked)
    steps = max(r.steps.count, 1) if blocked.size == 1 else 1
    return np.minimum(blocked, r.collective_wait_time / steps * blocked / total)


def _dilation(r: RankReport, steps: int) -> F64:
    """Per step, how much waiting for a CPU stretched the rank's work (1.0 when unknown or on GPU ranks)."""
    if len(r.step_dilation) == steps:
        return np.maximum(np.asarray(r.step_dilation, dtype=np.float64), 1.0)
    return np.ones(steps)


def rank_samples(ranks: list[RankReport]) -> list[RankSamples]:
    """Per-step cost samples of each rank, waits estimated across ranks (see the module docstring)."""
    raw: list[tuple[RankReport, F64, dict[str, F64], bool]] = []
    for r in ranks:
        if r.step_phases and len(r.step_phases) == len(r.steps.durations_us):
            raw.append((r, np.asarray(r.steps.durations_us, dtype=np.float64), _phase_arrays(r.step_phases), True))
        else:
            step, phases = _window_phases(r)
            raw.append((r, step, phases, False))
    blocked = {r.rank: phases["communication_wait"] for r, _, phases, _ in raw}
    floor = min((float(np.median(b)) for b in blocked.values() if b.size), default=0.0)
    measured = wait_is_measured(ranks)
    out: list[RankSamples] = []
    for r, step, phases, per_step in raw:
        b = blocked[r.rank]
        wait = _measured_wait(r, b) if measured else np.maximum(b - floor, 0.0)
        costs = {
            "compute": phases["forward"] + phases["backward"] + phases["optimizer"],
            "host": phases["data_loading"] + phases["other"],
            "communication": b - wait,
        }
        dilation = _dilation(r, step.size)
        tested = {
            "compute": costs["compute"] / dilation,
            "host": costs["host"] / dilation,
            "communication": costs["communication"],
        }
        share = MEASURED_RESIDUAL if len(r.step_cpu_wait) == step.size else INFERRED_RESIDUAL
        numbers = tuple(r.steps.numbers) if per_step and len(r.steps.numbers) == step.size else ()
        ops = r.step_ops_outside_work
        ops_outside = np.asarray(ops, dtype=np.float64) if per_step and len(ops) == step.size else None
        machine = r.node or (r.environment.hostname if r.environment else None)
        out.append(
            RankSamples(
                r.rank, r.node, step, costs, tested, wait, phases, per_step, share, numbers, ops_outside, machine
            )
        )
    return out


def with_collective_waits(ranks: list[RankReport]) -> list[RankReport]:
    """The summaries with collective_wait_time set to the diagnosis' own figure (the per-step waits, summed over
    the window) and marked estimated, and each collective's wait_us its share of it, so that ranks[], the
    evidence and the communication table quote one number."""
    if len(ranks) < 2 or wait_is_measured(ranks):
        return ranks
    out: list[RankReport] = []
    for s, r in zip(rank_samples(ranks), ranks, strict=True):
        total = float(s.wait.sum()) * (1 if s.per_step else max(r.steps.count, 1))
        out.append(r.model_copy(update={"collective_wait_time": total, "collective_wait_estimated": True,
                                        "collectives": _shared_out(r, total)}))  # fmt: skip
    return out


def _shared_out(r: RankReport, wait: float) -> list[Collective]:
    """The rank's wait shared out over its collectives in proportion to their time (outermost ones only, so that
    a collective and the op that carries it are not both charged)."""
    busy = sum(c.total_us for c in r.collectives if not c.name.startswith("c10d::"))
    if busy <= 0:
        return list(r.collectives)
    return [
        c.model_copy(
            update={"wait_us": 0.0 if c.name.startswith("c10d::") else min(c.total_us, wait * c.total_us / busy)}
        )
        for c in r.collectives
    ]
