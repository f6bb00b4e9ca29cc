"""Prometheus metrics of the sidecar, on a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "stepscope_sidecar_http_requests", "control API requests", ["route", "code"], registry=self.registry
        )
        self.captures = Counter(
            "stepscope_sidecar_captures", "captures that reached a terminal state", ["state"], registry=self.registry
        )
        self.upload_bytes = Counter("stepscope_sidecar_upload_bytes", "bytes uploaded", registry=self.registry)
        self.upload_retries = Counter("stepscope_sidecar_upload_retries", "upload retries", registry=self.registry)
        self.upload_failures = Counter(
            "stepscope_sidecar_upload_failures", "ranks whose upload failed for good", registry=self.registry
        )
        self.hook_ranks = Gauge("stepscope_sidecar_hook_ranks", "ranks whose hook reported in", registry=self.registry)
        self.busy = Gauge("stepscope_sidecar_busy", "1 while a capture is active", registry=self.registry)
        self.gpu_samples = Counter("stepscope_sidecar_gpu_samples", "NVML samples taken", registry=self.registry)
