"""The sidecar's Prometheus step metrics, computed at each scrape from the hooks' ring files (`step_telemetry`).

Per training process, with the labels `rank`, `job_name` and `namespace` only (bounded: never a step number or a
pod-unique value; Prometheus adds the pod from its target): a histogram of step durations (cumulative since the
process began, counted by the hook itself, so a restarted sidecar continues it), the median of the last N steps'
duration, own time (outside backward()) and data wait, steps per second over them, and the seconds since the last step
(a hang shows as this gauge growing; absent once the process exited). `job_name` rather than `job`: Prometheus owns
the `job` label of every series it scrapes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from itertools import accumulate
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from stepscope_contract.constants import ENV_JOB_NAME, ENV_POD_NAMESPACE
from stepscope_contract.step_telemetry import HISTOGRAM_BOUNDS
from stepscope_sidecar.step_telemetry import Ring, median, read_rings, seconds_since_last_step, steps_per_second

LABELS = ("rank", "job_name", "namespace")
DEFAULT_WINDOW = 100


def _bound(value: float) -> str:
    return f"{value:g}"


class StepCollector(Collector):
    """A prometheus_client collector over the ring files of one hook dir."""

    def __init__(self, hook_dir: Path, job: str = "", namespace: str = "", window: int = DEFAULT_WINDOW) -> None:
        self.hook_dir = hook_dir
        self.job = job
        self.namespace = namespace
        self.window = window

    @classmethod
    def from_env(cls, hook_dir: Path) -> StepCollector:
        return cls(hook_dir, os.environ.get(ENV_JOB_NAME, ""), os.environ.get(ENV_POD_NAMESPACE, ""))

    def _families(self) -> dict[str, Metric]:
        return {
            "duration": HistogramMetricFamily(
                "stepscope_step_duration_seconds", "training step durations, as counted by the hook", labels=LABELS
            ),
            "median": GaugeMetricFamily(
                "stepscope_step_median_seconds", "median duration of the last steps (without captures)", labels=LABELS
            ),
            "own": GaugeMetricFamily(
                "stepscope_step_own_median_seconds",
                "median of the last steps' own time: the step outside backward(), where DDP waits for the slowest rank",
                labels=LABELS,
            ),
            "data": GaugeMetricFamily(
                "stepscope_step_data_wait_median_seconds",
                "median of the last steps' time in DataLoader iterators",
                labels=LABELS,
            ),
            "rate": GaugeMetricFamily(
                "stepscope_steps_per_second", "steps per second over the last steps", labels=LABELS
            ),
            "since": GaugeMetricFamily(
                "stepscope_seconds_since_last_step",
                "seconds since the last step boundary (absent once the process exited)",
                labels=LABELS,
            ),
        }

    def describe(self) -> Iterable[Metric]:
        return list(self._families().values())

    def _add(self, families: dict[str, Metric], ring: Ring) -> None:
        labels = [str(ring.rank), self.job, self.namespace]
        buckets = [(_bound(b), float(c)) for b, c in zip(HISTOGRAM_BOUNDS, accumulate(ring.buckets), strict=False)]
        buckets.append(("+Inf", float(sum(ring.buckets))))
        families["duration"].add_metric(labels, buckets, ring.duration_sum)  # type: ignore[attr-defined]
        normal = ring.normal_steps()
        for key, values in (
            ("median", [s.duration for s in normal]),
            ("own", [s.own for s in normal]),
            ("data", [s.data_wait for s in normal]),
        ):
            value = median(values)
            if value is not None:
                families[key].add_metric(labels, value)  # type: ignore[attr-defined]
        rate = steps_per_second(normal)
        if rate is not None:
            families["rate"].add_metric(labels, rate)  # type: ignore[attr-defined]
        since = seconds_since_last_step(ring)
        if since is not None:
            families["since"].add_metric(labels, since)  # type: ignore[attr-defined]

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        for ring in read_rings(self.hook_dir, self.window):
            self._add(families, ring)
        return list(families.values())
