"""The noise-aware test itself: the sign test over steps, the median of the others, and effects that grow with
the excess and shrink with the job's measured noise."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis.stats import medians_of_others
from stepscope_analyzer.diagnosis.straggler_test import effects, sign_test

pytestmark = pytest.mark.unit


def test_sign_test() -> None:
    assert sign_test(5, 5) == pytest.approx(1 / 32)
    assert sign_test(0, 5) == 1.0
    assert sign_test(7, 8) == pytest.approx(9 / 256)
    assert sign_test(3, 0) == 1.0


def test_medians_of_others_match_the_slow_way() -> None:
    rng = np.random.default_rng(0)
    for n in range(2, 12):
        values = rng.integers(0, 6, n).astype(float)
        slow = [float(np.median(np.delete(values, i))) for i in range(n)]
        assert medians_of_others(values).tolist() == pytest.approx(slow)


def test_effect_size_is_the_excess_over_the_measured_noise() -> None:
    rng = np.random.default_rng(1)
    quiet = {r: 100.0 + rng.normal(0, 0.5, 6) for r in range(8)}
    quiet[3] = quiet[3] + 7.0
    noisy = {r: 100.0 + rng.normal(0, 10.0, 6) for r in range(8)}
    noisy[3] = noisy[3] + 7.0
    e_quiet = next(e for e in effects(quiet, 0.0) if e.rank == 3)
    e_noisy = next(e for e in effects(noisy, 0.0) if e.rank == 3)
    assert e_quiet.excess_us == pytest.approx(7.0, abs=1.0) and e_quiet.z > 5
    assert e_noisy.z < 3.5 < e_quiet.z
    assert e_quiet.steps_above == 6 and e_quiet.consistent(0.05)


def test_small_jobs_use_contention_as_a_noise_bound() -> None:
    """Two ranks: no rank-to-rank spread to measure; a rank whose samples had much CPU contention taken out of
    them is compared with a wider yardstick."""
    samples = {0: np.full(6, 6.5), 1: np.full(6, 8.6)}
    plain = next(e for e in effects(samples, 0.1) if e.rank == 1)
    wide = next(e for e in effects(samples, 0.1, residual={0: 0.0, 1: 0.15 * 10.8}) if e.rank == 1)
    assert plain.z > 3.5 > wide.z
