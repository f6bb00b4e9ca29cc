"""The job's gain from the what-if replay: the step time if every slow rank ran like its peers. Pure.

The replay (diagnosis.replay for a job with a pipeline layout, diagnosis.dp_replay for a data-parallel one) gives
the step time with the slow ranks' work at their peers'; that what-if, the one of every slow rank together where
there are several, is the expected step of the verdict, the report's gain sentence, report.json and the status
summary alike. It is replayed on the step the slowdown is measured on: the mean step when a slow rank stalls
intermittently, the median otherwise (`replay_base`). Jobs whose traces have no steps keep the estimate from the
slow ranks' excess over the recorded window (diagnosis.job_numbers), as nothing can be replayed there.
"""

from __future__ import annotations

import dataclasses

from stepscope_analyzer.diagnosis.dp_replay import ALL_LIKE_PEERS
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers
from stepscope_contract.report import WhatIf


def clears_noise(w: WhatIf, z: float) -> bool:
    """A replayed gain clears its noise: it is positive and at least `z` standard errors of the mean saving over
    the steps (the what-if's interval is two either side)."""
    se = max(w.gain_high_us - w.gain_us, 0.0) / 2.0 if w.gain_high_us is not None else 0.0
    return w.gain_us > 0 and w.gain_us >= z * se


def replay_base(numbers: StepNumbers) -> float:
    """The step the what-ifs are replayed from: the mean step when a slow rank stalls, the median otherwise."""
    return numbers.mean_step_us if numbers.from_mean else numbers.median_step_us


def slow_ranks_what_if(whatifs: list[WhatIf]) -> WhatIf | None:
    """The what-if of every slow rank running like its peers: the combined one, or the one slow rank's."""
    combined = next((w for w in whatifs if w.kind == ALL_LIKE_PEERS), None)
    single = [w for w in whatifs if w.kind == "like_peers"]
    return combined or (single[0] if len(single) == 1 else None)


def with_replayed_gain(numbers: StepNumbers, whatifs: list[WhatIf]) -> StepNumbers:
    """The numbers with the expected step and the speedup of the slow ranks' what-if, where one was replayed; no
    estimate where the replay saves nothing (the slow ranks do not hold the step up)."""
    w = slow_ranks_what_if(whatifs)
    base = replay_base(numbers)
    if w is None or base <= 0 or numbers.window_us > 0:
        return numbers
    if w.gain_us <= 0:
        return dataclasses.replace(numbers, expected_step_us=None, estimated_speedup=None)
    expected = max(base - w.gain_us, 0.1 * base)
    return dataclasses.replace(numbers, expected_step_us=expected, estimated_speedup=base / expected)
