"""Which ranks slow the job (slow_ranks.find_slow_ranks), on jobs made for one rule at a time."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.slow_ranks import find_slow_ranks
from stepscope_contract.report import CallFloors, Cause, RankReport
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


def _shared_cores_job(seed: int, work: float, stretch: float) -> list[RankReport]:
    """Four CPU ranks on shared cores: each step's compute is the rank's work (rank 3: `work` times the others')
    stretched by waiting for a CPU (twice; rank 3 `stretch` times), each within 3%, the stretch measured with a
    lognormal error (sigma 0.4); the ranks leave each step's all_reduce together; call floors show the work (rank
    3's `work` times the others')."""
    rng = np.random.default_rng(seed)
    ranks = synthetic_job(JobShape(world_size=4, steps=8), noise=0.02, seed=seed)
    calls = [f"aten::op{i}#0" for i in range(40)]
    rows: dict[int, list[dict[str, float]]] = {}
    dilation: dict[int, list[float]] = {}
    for r in ranks:
        mine = work if r.rank == 3 else 1.0
        rows[r.rank], dilation[r.rank] = [], []
        for p in r.step_phases:
            cpu = mine * (p.forward + p.backward + p.optimizer)
            d = (stretch if r.rank == 3 else 2.0) * rng.uniform(0.97, 1.03)
            rows[r.rank].append({**p.model_dump(), "forward": 0.0, "backward": cpu * d, "optimizer": 0.0})
            dilation[r.rank].append(d * float(np.exp(rng.normal(0.0, 0.4))))
    out = []
    for r in ranks:
        phases, durations = [], []
        for i, row in enumerate(rows[r.rank]):
            busy = {k: sum(v for n, v in rows[k][i].items() if n != "communication_wait") for k in rows}
            step = max(busy.values()) + 1_000.0
            phases.append(r.step_phases[i].model_copy(update={**row, "communication_wait": step - busy[r.rank]}))
            durations.append(step)
        floor = np.linspace(50.0, 2_000.0, len(calls)) * (work if r.rank == 3 else 1.0) * rng.uniform(0.97, 1.03, 40)
        floors = CallFloors(
            calls=calls, floor_us=floor.tolist(), even_us=floor.tolist(), odd_us=floor.tolist(), steps=8
        )
        steps = r.steps.model_copy(update={"durations_us": durations, "median_us": float(np.median(durations))})
        out.append(r.model_copy(update={"step_phases": phases, "step_dilation": dilation[r.rank], "steps": steps,
                                        "call_floors": floors}))  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(8))
def test_on_shared_cores_the_others_wait_for_a_ranks_extra_work_not_for_its_wait_for_a_cpu(seed: int) -> None:
    """Rank 3 does 1.5x the others' work (its call floors say so), its work stretched less by waiting for a CPU
    than theirs: the others wait for its extra work itself, about half of the excess its wall-clock compute shows.
    The wait check weighs that extra work, not the time it waited for a CPU beside it: rank 3 is named (by the
    floors in most draws, where its contention-corrected compute does not stand out). With the same work as the
    others nothing is named."""
    slow = find_slow_ranks(_shared_cores_job(seed, work=1.5, stretch=1.6), DiagnosisConfig())
    assert [(s.rank, s.cause) for s in slow] == [(3, Cause.COMPUTE)]
    assert find_slow_ranks(_shared_cores_job(seed, work=1.0, stretch=2.0), DiagnosisConfig()) == []
