"""How many CPUs this process may really use, and so how many ranks to analyse at once.

A pod's CPU limit is a CFS quota, not fewer visible cores: `os.cpu_count()` says 64 on a 64-core node even when the
pod may use 2, and 64 workers there would only thrash and multiply memory. The usable count is the smallest of the
cgroup v2 quota (`cpu.max`: "<quota> <period>" or "max <period>"), the cgroup v1 quota (`cpu.cfs_quota_us` /
`cpu.cfs_period_us`, -1 = none) and the CPUs the process is pinned to (sched_getaffinity); a quota of 1.5 CPUs counts
as 1 (a second worker would be throttled half the time). `STEPSCOPE_ANALYZER_WORKERS` overrides it (1 = one at a
time).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

WORKERS_ENV = "STEPSCOPE_ANALYZER_WORKERS"
CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def quota_from_v2(cpu_max: str) -> float | None:
    """CPUs allowed by a cgroup v2 `cpu.max` text ("200000 100000" -> 2.0); None for "max" or unreadable text."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def quota_from_v1(quota_us: str, period_us: str) -> float | None:
    """CPUs allowed by cgroup v1's cfs_quota_us / cfs_period_us (-1 = no quota)."""
    try:
        quota, period = int(quota_us.strip()), int(period_us.strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cpus(quota: float | None, affinity: int) -> int:
    """Whole CPUs to use: the pinned CPUs, capped by the quota rounded down (at least 1)."""
    cpus = max(1, affinity)
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota + 1e-9)))
    return cpus


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_quota() -> float | None:
    """This process's CPU quota from cgroup v2, else v1; None when there is none."""
    v2 = _read(CGROUP_V2_MAX)
    if v2 is not None:
        return quota_from_v2(v2)
    quota, period = _read(CGROUP_V1_QUOTA), _read(CGROUP_V1_PERIOD)
    return quota_from_v1(quota, period) if quota is not None and period is not None else None


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_count(ranks: int, env: Mapping[str, str] | None = None) -> int:
    """Processes to analyse `ranks` ranks with: the override, else the usable CPUs; never more than the ranks."""
    e = os.environ if env is None else env
    text = e.get(WORKERS_ENV, "").strip()
    if text:
        try:
            wanted = int(text)
        except ValueError as exc:
            raise ValueError(f"{WORKERS_ENV} must be a whole number, got {text!r}") from exc
        if wanted >= 1:
            return max(1, min(wanted, ranks))
    return max(1, min(usable_cpus(cgroup_quota(), _affinity()), ranks))


def cpus_per_trace(workers: int = 1) -> int:
    """The usable CPUs (the quota, not the override of the worker count) each of `workers` traces parsed at once may
    count on, at least 1."""
    return max(1, usable_cpus(cgroup_quota(), _affinity()) // max(1, workers))


def workers_forced(env: Mapping[str, str] | None = None) -> bool:
    """Whether the worker count was set explicitly (then even small traces go to the pool)."""
    e = os.environ if env is None else env
    return bool(e.get(WORKERS_ENV, "").strip())


__all__ = [
    "WORKERS_ENV",
    "cgroup_quota",
    "cpus_per_trace",
    "quota_from_v1",
    "quota_from_v2",
    "usable_cpus",
    "worker_count",
]
