"""Prometheus metrics of the operator."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

SESSIONS = Gauge("stepscope_sessions", "ProfileSessions by phase", ["phase"])
TARGETS_SIGNALLED = Counter("stepscope_targets_signalled_total", "start requests the sidecars accepted")
SIGNAL_LATENCY = Histogram(
    "stepscope_signal_latency_seconds",
    "time to get a sidecar's answer to a start request, retries included",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
ANALYZER_JOBS = Counter("stepscope_analyzer_jobs_total", "analyzer Jobs created")

_phases: dict[str, str] = {}
_known: set[str] = set()


def record_phase(uid: str, phase: str | None) -> None:
    """Remember one session's phase and refresh the per-phase gauge."""
    if phase is None:
        _phases.pop(uid, None)
    else:
        _phases[uid] = phase
    counts: dict[str, int] = {}
    for value in _phases.values():
        counts[value] = counts.get(value, 0) + 1
    _known.update(counts)
    for value in _known:
        SESSIONS.labels(phase=value).set(counts.get(value, 0))


def serve(port: int) -> None:
    start_http_server(port)
