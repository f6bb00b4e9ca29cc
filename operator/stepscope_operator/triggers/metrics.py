"""Prometheus metrics of the operator's ProfileTriggers (on the operator's default registry and metrics port)."""

from __future__ import annotations

from prometheus_client import Counter

EVALUATIONS = Counter(
    "stepscope_trigger_evaluations_total",
    "ProfileTrigger evaluations by result: fired, holds (a condition held, no session), quiet, invalid",
    ["result"],
)
FIRES = Counter("stepscope_trigger_fires_total", "sessions created by ProfileTriggers, by condition", ["condition"])
