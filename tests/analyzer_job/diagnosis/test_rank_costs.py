"""The contention residual of each rank's corrected samples: 15% of the stretch taken out where the stretches were
inferred from op calls, 5% where the hook measured the training thread's CPU wait for every recorded step."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis.rank_costs import INFERRED_RESIDUAL, MEASURED_RESIDUAL, rank_samples
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


def test_a_measured_cpu_wait_leaves_a_smaller_residual_than_an_inferred_one() -> None:
    ranks = synthetic_job(JobShape(world_size=4, steps=6), noise=0.02, seed=3)
    steps = len(ranks[0].step_phases)
    ranks = [r.model_copy(update={"step_dilation": [2.0] * steps}) for r in ranks]
    ranks[1] = ranks[1].model_copy(update={"step_cpu_wait": [5_000.0] * steps})
    ranks[2] = ranks[2].model_copy(update={"step_cpu_wait": [5_000.0] * (steps - 1)})  # not every step: not used
    samples = {s.rank: s for s in rank_samples(ranks)}
    assert samples[1].residual_share == MEASURED_RESIDUAL
    assert samples[0].residual_share == samples[2].residual_share == INFERRED_RESIDUAL
    for s in samples.values():  # half of each wall-clock value was taken out as waiting for a CPU
        stretch = float(np.median(s.costs["compute"] - s.tested["compute"]))
        assert s.residual_us("compute") == pytest.approx(s.residual_share * stretch)
        assert stretch == pytest.approx(float(np.median(s.costs["compute"])) / 2, rel=0.2)
