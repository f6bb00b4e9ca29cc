"""The machine-speed probe timing tests judge against (testing/stepscope_testing/machine_speed.py): the slowdown of
a recent window (or its slowest stretch) over a baseline window, and when it explains a job's slowdown."""

from __future__ import annotations

import time

import pytest

from stepscope_testing.machine_speed import SpeedProbe, explained, slowdown

pytestmark = pytest.mark.unit


def test_slowdown_compares_medians_and_finds_a_brief_spike() -> None:
    calm = [(float(t), 0.003) for t in range(100)]
    spike = [(100.0 + t / 10, 0.009 if 20 <= t < 30 else 0.003) for t in range(100)]  # 1 s at 3x within 10 s
    samples = calm + spike
    assert slowdown(samples, (100.0, 110.0), (0.0, 100.0)) == pytest.approx(1.0)  # the median hides the spike
    assert slowdown(samples, (100.0, 110.0), (0.0, 100.0), span=1.0) == pytest.approx(3.0)
    assert slowdown(samples, (200.0, 210.0), (0.0, 100.0)) is None  # no sample there


def test_explained_needs_the_machine_to_slow_half_as_much_as_the_job() -> None:
    assert explained(1.6, 1.3) and explained(1.6, 2.0)
    assert not explained(1.6, 1.1) and not explained(1.6, 1.0)


def test_the_probe_samples_while_it_runs() -> None:
    with SpeedProbe(period=0.01) as probe:
        time.sleep(0.3)
    samples = probe.samples()
    assert len(samples) >= 5 and all(took > 0 for _, took in samples)
    assert probe.slowdown((samples[-1][0] - 0.1, samples[-1][0]), (0.0, samples[-1][0])) is not None
