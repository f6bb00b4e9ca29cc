"""The usable CPU count from cgroup quota texts and pinning, and the worker-count override."""

from __future__ import annotations

import pytest

from stepscope_analyzer.workers import cpu_quota
from stepscope_analyzer.workers.cpu_quota import WORKERS_ENV, quota_from_v1, quota_from_v2, usable_cpus, worker_count

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("200000 100000\n", 2.0),
        ("150000 100000", 1.5),
        ("max 100000\n", None),
        ("", None),
        ("x y", None),
        ("0 100000", None),
    ],
)
def test_cgroup_v2_cpu_max(text: str, cpus: float | None) -> None:
    assert quota_from_v2(text) == cpus


@pytest.mark.parametrize(
    ("quota", "period", "cpus"),
    [("-1\n", "100000\n", None), ("400000", "100000", 4.0), ("50000", "100000", 0.5), ("?", "1", None)],
)
def test_cgroup_v1_cfs_quota(quota: str, period: str, cpus: float | None) -> None:
    assert quota_from_v1(quota, period) == cpus


@pytest.mark.parametrize(
    ("quota", "affinity", "cpus"),
    [(None, 64, 64), (2.0, 64, 2), (1.5, 64, 1), (0.5, 64, 1), (8.0, 4, 4), (None, 0, 1), (2.9, 8, 2)],
)
def test_usable_cpus_is_the_quota_rounded_down_within_the_pinned_cpus(
    quota: float | None, affinity: int, cpus: int
) -> None:
    assert usable_cpus(quota, affinity) == cpus


def test_the_override_wins_but_never_exceeds_the_ranks() -> None:
    assert worker_count(8, {WORKERS_ENV: "3"}) == 3
    assert worker_count(2, {WORKERS_ENV: "16"}) == 2
    assert worker_count(8, {WORKERS_ENV: "1"}) == 1
    assert worker_count(0, {WORKERS_ENV: "4"}) == 1
    assert 1 <= worker_count(3, {WORKERS_ENV: "0"}) <= 3  # 0: the automatic count
    with pytest.raises(ValueError, match=WORKERS_ENV):
        worker_count(4, {WORKERS_ENV: "many"})


@pytest.mark.parametrize(
    ("quota", "pinned", "workers", "each"), [(None, 8, 2, 4), (2.0, 8, 2, 1), (3.5, 16, 1, 3), (None, 2, 8, 1)]
)
def test_each_trace_parsed_at_once_gets_its_share_of_the_quota(
    monkeypatch: pytest.MonkeyPatch, quota: float | None, pinned: int, workers: int, each: int
) -> None:
    monkeypatch.setattr(cpu_quota, "cgroup_quota", lambda: quota)
    monkeypatch.setattr(cpu_quota, "_affinity", lambda: pinned)
    monkeypatch.setenv(WORKERS_ENV, "1")  # the override of the worker count does not change the CPUs there are
    assert cpu_quota.cpus_per_trace(workers) == each
