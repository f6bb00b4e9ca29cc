"""What a rank's folder holds beside its trace, folded into the rank's summary: the environment its manifest and
meta.json record (versions, host, capture times, whether GPU metrics were captured) and its GPU metrics
(gpu_metrics.jsonl.gz) over the window the trace recorded, read within max_gpu_metrics_file_bytes (refused from its
size, before it is downloaded). A file that cannot be read becomes a rank error, never an exception."""

from __future__ import annotations

from typing import Any

from stepscope_analyzer.limits import LimitExceededError
from stepscope_analyzer.ranks.storage_io import StorageError, Store, read_bounded
from stepscope_contract.manifest import RankManifest
from stepscope_contract.report import RankEnvironment, RankError, RankReport


def manifest_environment(manifest: RankManifest | None) -> RankEnvironment | None:
    """The environment fields a rank's manifest (and the hook's meta.json inside it) records."""
    if manifest is None:
        return None
    meta = manifest.meta
    return RankEnvironment(
        hostname=meta.hostname if meta else None,
        torch_version=meta.torch_version if meta else None,
        cuda_runtime_version=meta.cuda_version if meta else None,
        python_version=meta.python_version if meta else None,
        capture_started_at=manifest.capture_started_at,
        capture_finished_at=manifest.capture_finished_at,
        gpu_metrics_status=manifest.gpu_metrics[:300],
    )


def merge_environment(first: RankEnvironment | None, second: RankEnvironment | None) -> RankEnvironment | None:
    """Field by field: `first`'s value where it has one, else `second`'s."""
    if first is None or second is None:
        return first or second
    merged = second.model_dump()
    merged.update({k: v for k, v in first.model_dump().items() if v is not None})
    return RankEnvironment.model_validate(merged)


def _window(summary: RankReport) -> tuple[float, float] | None:
    env = summary.environment
    if env is None or env.window_start is None or env.window_end is None:
        return None
    return env.window_start.timestamp(), env.window_end.timestamp()


def rank_extras(
    store: Store, gpu_metrics_key: str | None, manifest: RankManifest | None, summary: RankReport
) -> tuple[dict[str, Any], list[RankError]]:
    """Fields to update on an analysed rank's summary (environment, gpu_metrics) and the errors met."""
    update: dict[str, Any] = {}
    errors: list[RankError] = []
    environment = merge_environment(summary.environment, manifest_environment(manifest))
    if environment is not None:
        update["environment"] = environment
    if gpu_metrics_key is None:
        return update, errors
    # imported here: reading ranks without GPU metrics (and `stepscope analyze` before its first ranks are with the
    # workers) does not load numpy and the analyses
    from stepscope_analyzer.analyses.gpu_metrics import GpuMetricsError, read_gpu_metrics

    local_rank = manifest.meta.local_rank if manifest and manifest.meta else None
    try:
        raw = read_bounded(store, gpu_metrics_key, "max_gpu_metrics_file_bytes")
        metrics, skipped = read_gpu_metrics(raw, window=_window(summary), local_rank=local_rank)
    except (StorageError, GpuMetricsError, LimitExceededError) as exc:
        errors.append(RankError(rank=summary.rank, source=gpu_metrics_key, message=f"gpu metrics unreadable: {exc}"))
        return update, errors
    if skipped:
        message = f"{skipped} line(s) of the gpu metrics were not samples in the contract's format; skipped"
        errors.append(RankError(rank=summary.rank, source=gpu_metrics_key, message=message))
    if metrics is not None:
        update["gpu_metrics"] = metrics
        if environment is not None and metrics.name:  # NVML names the rank's own device
            update["environment"] = environment.model_copy(update={"device_name": metrics.name})
    return update, errors
