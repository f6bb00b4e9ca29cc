"""Operator configuration, read once from the environment (the Helm chart sets these; docs/interfaces.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from stepscope_contract.storage_defaults import StorageDefaults


@dataclass(frozen=True)
class OperatorConfig:
    watch_namespaces: tuple[str, ...] = ()
    analyzer_image: str = "stepscope/analyzer:0.1.0"
    analyzer_service_account: str = "stepscope-analyzer"
    analyzer_command: tuple[str, ...] = ("stepscope", "analyzer-job")
    analyzer_deadline_seconds: int = 1800
    sidecar_token_file: str = "/var/run/secrets/stepscope/token"  # noqa: S105 - a path
    signal_concurrency: int = 64
    signal_timeout_seconds: float = 5.0
    signal_attempts: int = 3
    metrics_port: int = 8080
    health_port: int = 8081
    tick_seconds: float = 1.0
    trigger_tick_seconds: float = 5.0  # how often ProfileTriggers are looked at (each has its own evaluation interval)
    shard_threshold: int = 64  # ranks above which the analysis is sharded into an Indexed Job
    local_mode: bool = False  # the embedded local cluster: file:// artifacts may be deleted
    extra_env: Mapping[str, str] = field(default_factory=dict)
    storage: StorageDefaults = field(default_factory=StorageDefaults)  # STEPSCOPE_STORAGE_*: sessions' defaults

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OperatorConfig:
        e = os.environ if env is None else env
        namespaces = tuple(n.strip() for n in e.get("STEPSCOPE_WATCH_NAMESPACES", "").split(",") if n.strip())
        command = e.get("STEPSCOPE_ANALYZER_COMMAND")
        parsed_command: tuple[str, ...] = cls.analyzer_command
        if command:
            value = json.loads(command)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
                raise ValueError("STEPSCOPE_ANALYZER_COMMAND must be a JSON list of strings")
            parsed_command = tuple(value)
        # Environment handed to the analyzer Job as is (local runs: KUBECONFIG, S3 endpoint overrides).
        extra = {
            k[len("STEPSCOPE_ANALYZER_ENV_") :]: v for k, v in e.items() if k.startswith("STEPSCOPE_ANALYZER_ENV_")
        }
        return cls(
            watch_namespaces=namespaces,
            analyzer_image=e.get("STEPSCOPE_ANALYZER_IMAGE", cls.analyzer_image),
            analyzer_service_account=e.get("STEPSCOPE_ANALYZER_SERVICE_ACCOUNT", cls.analyzer_service_account),
            analyzer_command=parsed_command,
            analyzer_deadline_seconds=int(e.get("STEPSCOPE_ANALYZER_DEADLINE_SECONDS", cls.analyzer_deadline_seconds)),
            sidecar_token_file=e.get("STEPSCOPE_SIDECAR_TOKEN_FILE", cls.sidecar_token_file),
            signal_concurrency=max(1, int(e.get("STEPSCOPE_SIGNAL_CONCURRENCY", cls.signal_concurrency))),
            signal_timeout_seconds=float(e.get("STEPSCOPE_SIGNAL_TIMEOUT_SECONDS", cls.signal_timeout_seconds)),
            signal_attempts=max(1, int(e.get("STEPSCOPE_SIGNAL_ATTEMPTS", cls.signal_attempts))),
            metrics_port=int(e.get("STEPSCOPE_METRICS_PORT", cls.metrics_port)),
            health_port=int(e.get("STEPSCOPE_HEALTH_PORT", cls.health_port)),
            tick_seconds=float(e.get("STEPSCOPE_TICK_SECONDS", cls.tick_seconds)),
            trigger_tick_seconds=float(e.get("STEPSCOPE_TRIGGER_TICK_SECONDS", cls.trigger_tick_seconds)),
            shard_threshold=int(e.get("STEPSCOPE_SHARD_THRESHOLD", cls.shard_threshold)),
            local_mode=e.get("STEPSCOPE_LOCAL_MODE", "").strip().lower() in ("1", "true", "yes"),
            extra_env=extra,
            storage=StorageDefaults.from_env(e),
        )


def retry_after(tick_seconds: float) -> float:
    """How long a timer whose tick failed (the API server or a sidecar unreachable for a while) waits before it runs
    again: five of its ticks, at least 2 s, not kopf's default minute, so that a short outage delays the work it
    drives (a session's lifecycle, a trigger's evaluations) by about its own length."""
    return max(2.0, 5 * tick_seconds)
