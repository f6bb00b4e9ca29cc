"""Flags for ranks that stall intermittently (diagnosis.intermittent) on one of their costs, beside the median
test's flags (slow_ranks.flagged_costs). Pure."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.intermittent import STALL_SHARE, Stall, rank_excess, stalls
from stepscope_analyzer.diagnosis.job_view import Flag, JobView
from stepscope_analyzer.diagnosis.rank_costs import COSTS
from stepscope_analyzer.diagnosis.straggler_test import Effect

F64 = npt.NDArray[np.float64]
OWN_COSTS = ("compute", "host")
"""a rank's own time: a stall that falls partly in each is tested on their sum and charged to the larger part"""


def _costs_of(view: JobView, costs: tuple[str, ...], tested: bool) -> dict[int, F64]:
    """Per rank, the per-step sum of `costs` (without CPU-contention stretches when `tested`)."""
    out: dict[int, F64] = {}
    for r, s in view.samples.items():
        table = s.tested if tested else s.costs
        out[r] = np.sum([table[c] for c in costs], axis=0)
    return out


def _stalls(view: JobView, cfg: DiagnosisConfig) -> list[tuple[str, Stall]]:
    """(cost, stall) of the ranks that stall intermittently: per cost, then on own time for the others."""
    numbers = {r: s.numbers for r, s in view.samples.items()}
    args = (cfg.outlier_threshold, STALL_SHARE * view.step_us, cfg.noise_floor_percent / 100.0 * view.step_us)

    def find(costs: tuple[str, ...]) -> list[Stall]:
        return stalls(_costs_of(view, costs, True), _costs_of(view, costs, False), *args, numbers=numbers)

    found = [(c, st) for c in COSTS if c != "communication" or view.measured_wait for st in find((c,))]
    seen = {st.rank for _, st in found}
    for st in find(OWN_COSTS):
        if st.rank not in seen:
            at = list(st.stalled)
            part = {
                c: float(np.nansum(rank_excess(_costs_of(view, (c,), False), st.rank, numbers)[at])) for c in OWN_COSTS
            }
            found.append((max(OWN_COSTS, key=lambda c: part[c]), st))
    return found


def stall_flags(view: JobView, cfg: DiagnosisConfig, flagged: dict[int, list[Flag]]) -> dict[int, list[Flag]]:
    """`flagged` with the costs ranks stall intermittently on (diagnosis.intermittent); the mean wall-clock excess
    (what the job pays) must reach the user's floor (the stalls are beyond the noise already: the CPU-contention
    correction, which divides a stall's sleep as if a busy CPU had stretched it, only decides that). A cost already
    flagged keeps its effect and gains the stall; its excess becomes the larger of the two (the mean holds the
    stalls, the median does not)."""
    floor = cfg.floor_us(view.step_us)
    out = {rank: list(flags) for rank, flags in flagged.items()}
    for cost, st in _stalls(view, cfg):
        wall = st.wall_mean_excess_us
        if wall < floor:
            continue
        mine = out.setdefault(st.rank, [])
        same = next((i for i, f in enumerate(mine) if f.cost == cost), None)
        if same is not None:
            mine[same] = Flag(cost, mine[same].effect, max(mine[same].wall_excess_us, wall), st)
            continue
        value = float(np.mean(view.samples[st.rank].tested[cost]))
        effect = Effect(
            rank=st.rank,
            excess_us=st.mean_excess_us,
            noise_us=st.noise_us,
            z=st.z,
            steps_above=st.spikes,
            steps=st.steps,
            p_value=1.0,
            reference_us=value - st.mean_excess_us,
            value_us=value,
        )
        mine.append(Flag(cost, effect, wall, st, persistent=False))
    return out
