"""The report's environment block: versions, devices, world size, the capture spec and the captured window,
from the ranks' environments (trace metadata, manifests) and the session's spec. Pure.

Values that differ between ranks are listed with the ranks that hold each ("2.3.0 (ranks 0-3), 2.2.2 (ranks
4-7)"), so a mismatched rank stands out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import CaptureInfo, Hang, RankEnvironment, RankReport, RankStatus, Report

MAX_VALUE_CHARS = 400


@dataclass(frozen=True)
class EnvRow:
    label: str
    value: str


def by_ranks(ranks: list[RankReport], get: Callable[[RankEnvironment], str | None]) -> str | None:
    """One value, or each distinct value with its ranks; None when no rank knows it."""
    holders: dict[str, list[int]] = {}
    for r in ranks:
        value = get(r.environment) if r.environment is not None else None
        if value:
            holders.setdefault(value, []).append(r.rank)
    if not holders:
        return None
    if len(holders) == 1:
        return next(iter(holders))
    ordered = sorted(holders.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    text = ", ".join(f"{value} (ranks {format_rank_set(rs)})" for value, rs in ordered)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _backend(env: RankEnvironment) -> str | None:
    if not env.backend:
        return None
    return f"{env.backend} {env.nccl_version}" if env.nccl_version else env.backend


def _cuda(env: RankEnvironment) -> str | None:
    parts = []
    if env.cuda_runtime_version:
        parts.append(f"runtime {env.cuda_runtime_version}")
    if env.cuda_driver_version:
        parts.append(f"driver {env.cuda_driver_version}")
    return ", ".join(parts) or None


def capture_text(capture: CaptureInfo | None, ranks: list[RankReport]) -> str:
    """The capture spec in words, or what the traces show when the spec is not known."""
    if capture is None:
        counts = sorted({r.steps.count for r in ranks if r.steps.count})
        recorded = "/".join(map(str, counts)) if counts else "no"
        return f"{recorded} steps recorded per rank (the session's spec is not known here)"
    parts = [f"{capture.steps} steps after {capture.skip_steps} skipped"]
    if capture.activities:
        parts.append("activities " + ", ".join(capture.activities))
    options = [
        name
        for name, on in (
            ("record shapes", capture.record_shapes),
            ("with stack", capture.with_stack),
            ("profile memory", capture.profile_memory),
        )
        if on
    ]
    if options:
        parts.append(", ".join(options))
    gpu = f"every {capture.gpu_metrics_interval_ms} ms" if capture.gpu_metrics_interval_ms else "off"
    parts.append(f"GPU metrics {gpu}")
    if capture.step_timeout_seconds:
        parts.append(f"step timeout {capture.step_timeout_seconds} s")
    return "; ".join(parts)


def _span(starts: list[datetime], ends: list[datetime]) -> str | None:
    if not starts or not ends:
        return None
    first, last = min(starts), max(ends)
    seconds = (last - first).total_seconds()
    return f"{first.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]} → {last.strftime('%H:%M:%S.%f')[:-3]} UTC ({seconds:.2f} s)"


def window_text(ranks: list[RankReport]) -> str | None:
    """The steps' window over all ranks (trace clocks), and the sidecars' capture when known."""
    envs = [r.environment for r in ranks if r.environment is not None]
    steps = _span([e.window_start for e in envs if e.window_start], [e.window_end for e in envs if e.window_end])
    capture = _span(
        [e.capture_started_at for e in envs if e.capture_started_at],
        [e.capture_finished_at for e in envs if e.capture_finished_at],
    )
    parts = ([f"steps {steps}"] if steps else []) + ([f"capture {capture}"] if capture else [])
    return "; ".join(parts) or None


def gpu_metrics_note(ranks: list[RankReport]) -> str | None:
    """None when some rank has GPU metrics; else the one sentence that says why there are none."""
    if any(r.gpu_metrics is not None for r in ranks):
        return None
    reasons = by_ranks(ranks, lambda e: e.gpu_metrics_status if e.gpu_metrics_status != "captured" else None)
    if reasons:
        return f"No GPU metrics: {reasons}."
    if any(r.device == "cuda" for r in ranks):
        return "No GPU metrics were stored beside the traces."
    return "No GPU metrics: the ranks ran on CPU only."


def _cpu_only(ranks: list[RankReport]) -> bool:
    analysed = [r for r in ranks if r.status is RankStatus.OK]
    return bool(analysed) and all(r.device == "cpu" for r in analysed)


def environment_rows(report: Report) -> list[EnvRow]:
    ranks = report.ranks
    candidates: list[tuple[str, str | None]] = [
        ("world size", str(report.world_size) if report.world_size else None),
        ("torch", by_ranks(ranks, lambda e: e.torch_version)),
        ("python", by_ranks(ranks, lambda e: e.python_version)),
        ("backend", by_ranks(ranks, _backend)),
        ("CUDA", by_ranks(ranks, _cuda)),
        ("devices", by_ranks(ranks, lambda e: e.device_name) or ("CPU only" if _cpu_only(ranks) else None)),
        ("capture", capture_text(report.capture, ranks) if ranks or report.capture else None),
        ("captured", window_text(ranks)),
    ]
    return [EnvRow(label, value) for label, value in candidates if value]


@dataclass(frozen=True)
class EnvTable:
    """The per-rank environment table: only the columns some rank knows a value for."""

    headers: list[str]
    rows: list[list[str]]


def _steps_cell(r: RankReport, hang: Hang | None) -> str:
    env = r.environment
    if env is not None and env.window_start and env.window_end:
        return f"{env.window_start.strftime('%H:%M:%S.%f')[:-3]} → {env.window_end.strftime('%H:%M:%S.%f')[:-3]}"
    if hang is None or hang.last_step is None:
        return ""
    since = f", then none for {hang.seconds_since_last_step:.1f} s" if hang.seconds_since_last_step is not None else ""
    return f"{hang.last_step} steps{since}"


def environment_table(ranks: list[RankReport], hangs: list[Hang]) -> EnvTable:
    """Rank, node, pod, host, device, torch and the steps recorded (a hung rank: its last step), each column only
    where some rank has a value: a hung rank's host and torch come from its manifest."""
    by_rank = {h.rank: h for h in hangs}

    def env(r: RankReport, get: Callable[[RankEnvironment], str | None]) -> str:
        return (get(r.environment) if r.environment is not None else None) or ""

    columns: list[tuple[str, Callable[[RankReport], str]]] = [
        ("node", lambda r: r.node or ""),
        ("pod", lambda r: r.pod or ""),
        ("host", lambda r: env(r, lambda e: e.hostname)),
        ("device", lambda r: env(r, lambda e: e.device_name) or r.device),
        ("torch", lambda r: env(r, lambda e: e.torch_version)),
        ("steps recorded (UTC)", lambda r: _steps_cell(r, by_rank.get(r.rank))),
    ]
    cells = [[get(r) for _, get in columns] for r in ranks]
    kept = [i for i in range(len(columns)) if any(row[i] for row in cells)]
    return EnvTable(
        headers=["rank"] + [columns[i][0] for i in kept],
        rows=[[str(r.rank)] + [row[i] for i in kept] for r, row in zip(ranks, cells, strict=True)],
    )
