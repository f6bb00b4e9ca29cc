"""Multi-rank GPU session folders built from one real Kineto trace, with NVML samples in the contract's format.

The trace is Holistic Trace Analysis's `tests/data/nccl_parser_config/nccl_data.json.gz`
(github.com/facebookresearch/HolisticTraceAnalysis, MIT License, Copyright Meta Platforms), kept unmodified in
fixtures/hta/ (see its README). Each rank of a scenario is that trace re-timed by stepscope_testing.gpu_jobs (its
rank and world size rewritten, per-kernel jitter so that balanced GPUs are never identical, collectives ending on
every rank when the last one arrives); a throttled rank's compute kernels take `factor` times longer, so the others
wait for it inside the collectives, and its NVML samples show
the SM clock held down by thermal slowdown. Samples also cover a second before the recorded steps, at idle
clocks, which the analysis must leave out.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import random
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stepscope_contract.gpu_metrics import GpuSample
from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import GPU_METRICS_FILE, MANIFEST_FILE, TRACE_FILE
from stepscope_contract.wire import CaptureState, RankMeta
from stepscope_testing.gpu_jobs import GpuJob, write_job

HTA_TRACE = Path(__file__).resolve().parent / "fixtures" / "hta" / "nccl_2rank_rank0.json.gz"
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
THERMAL = 0x20 | 0x40  # NVML sw + hw thermal slowdown
HOSTILE_KERNEL = '<img src=x onerror="parent.pwned=1">gemm'
HOSTILE_NODE = "<script>parent.pwned=2</script>node"
SAMPLE_PERIOD_S = 0.05


@dataclass(frozen=True)
class Scenario:
    world_size: int = 8
    throttled: int | None = 5
    factor: float = 2.0
    ranks_per_node: int = 4
    seed: int = 0
    gpu_metrics: bool = True
    hostile: bool = False
    trace: Path = HTA_TRACE


def rank_traces(sc: Scenario) -> list[dict[str, Any]]:
    """Every rank's trace: the real trace re-timed by stepscope_testing's collective timing model (the throttled
    rank's compute kernels take `factor` times as long, and the others wait for it inside the collectives)."""
    scale = {sc.throttled: sc.factor} if sc.throttled is not None else {}
    job = GpuJob(name="gpu-scenario", source=str(sc.trace), world=sc.world_size, scale=scale, seed=sc.seed)
    with tempfile.TemporaryDirectory() as tmp:
        out = write_job(job, Path(tmp))
        docs = [
            json.loads(gzip.decompress((out / f"rank{r}.pt.trace.json.gz").read_bytes())) for r in range(sc.world_size)
        ]
    for rank, doc in enumerate(docs):
        doc["distributedInfo"] = {**doc["distributedInfo"], "rank": rank, "world_size": sc.world_size}
        pg = doc["distributedInfo"].get("pg_config")
        if isinstance(pg, list) and pg:
            pg[0] = {**pg[0], "pg_size": sc.world_size, "ranks": list(range(sc.world_size))}
        if sc.hostile:
            top = "void cudnn::bn_bw_1C11_kernel_new"
            for e in doc["traceEvents"]:
                if str(e.get("name", "")).startswith(top):
                    e["name"] = HOSTILE_KERNEL
    return docs


def trace_window(doc: dict[str, Any]) -> tuple[float, float]:
    """Unix seconds of the first step's start and the last step's end."""
    steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    base = doc.get("baseTimeNanoseconds", 0) / 1e9
    return base + min(e["ts"] for e in steps) / 1e6, base + max(e["ts"] + e["dur"] for e in steps) / 1e6


def nvml_samples(window: tuple[float, float], gpu: int, throttled: bool, seed: int) -> list[dict[str, Any]]:
    """Samples in the contract's format (camelCase keys), from a second before the window to its end."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    t = window[0] - 1.0 + SAMPLE_PERIOD_S / 2  # no sample exactly at the window's edge
    tick = 0
    while t <= window[1] + SAMPLE_PERIOD_S:
        busy = t >= window[0]
        clock = (705 if throttled else 1410) if busy else 210
        rec: dict[str, Any] = {
            "t": round(t, 4),
            "gpu": gpu,
            "utilization": {"gpu": 98 if busy else 0, "memory": 40 if busy else 0},
            "memory": {"used": 30_000_000_000 + rng.randrange(10**8), "total": 42_505_273_344},
            "powerW": round((235.0 if throttled else 290.0) + rng.uniform(-8, 8) if busy else 62.0, 1),
            "smClockMHz": clock - (rng.randrange(0, 15) if busy else 0),
            "memClockMHz": 1215,
            "temperatureC": (89 if throttled else 58 + rng.randrange(0, 4)) if busy else 45,
            "throttleReasons": (THERMAL if throttled else 0) if busy else 0x1,
        }
        if tick < 3:
            rec |= {"name": "NVIDIA A100-PG509-200", "smClockMaxMHz": 1410, "powerLimitW": 400.0}
        GpuSample.model_validate(rec)  # the scenario writes the contract's format
        out.append(rec)
        t += SAMPLE_PERIOD_S
        tick += 1
    return out


@functools.cache
def _trace_files(sc: Scenario) -> tuple[tuple[bytes, tuple[float, float]], ...]:
    """Every rank's compressed trace and its window, made once per scenario (its GPU metrics aside) and process."""
    return tuple(
        (gzip.compress(json.dumps(doc).encode(), compresslevel=1), trace_window(doc)) for doc in rank_traces(sc)
    )


def build_session(root: Path, sc: Scenario = Scenario()) -> Path:
    """Write `root`/ranks/<r>/{trace, gpu_metrics, manifest}; return `root`."""
    traces = _trace_files(dataclasses.replace(sc, gpu_metrics=True))  # the traces do not depend on the metrics
    for rank in range(sc.world_size):
        folder = root / "ranks" / str(rank)
        folder.mkdir(parents=True, exist_ok=True)
        data, window = traces[rank]
        (folder / TRACE_FILE).write_bytes(data)
        local_rank = rank % sc.ranks_per_node
        if sc.gpu_metrics:
            lines = nvml_samples(window, local_rank, rank == sc.throttled, sc.seed * 1000 + rank)
            text = "".join(json.dumps(r) + "\n" for r in lines)
            (folder / GPU_METRICS_FILE).write_bytes(gzip.compress(text.encode()))
        node = f"gpu-node-{rank // sc.ranks_per_node}"
        if sc.hostile and rank == sc.throttled:
            node = HOSTILE_NODE
        meta = RankMeta(
            capture_id="cap-gpu-scenario",
            rank=rank,
            world_size=sc.world_size,
            local_rank=local_rank,
            pod=f"llama-train-worker-{rank}",
            node=node,
            hostname=f"llama-train-worker-{rank}",
            pid=1000 + rank,
            torch_version="2.3.0+cu121",
            cuda_version="12.1",
            python_version="3.10.14",
            device="cuda",
            steps_requested=3,
            steps_captured=3,
        )
        manifest = RankManifest(
            capture_id=meta.capture_id,
            namespace="ml-team",
            session="gpu-check",
            pod=meta.pod,
            node=node,
            rank=rank,
            state=CaptureState.UPLOADED,
            meta=meta,
            gpu_metrics="captured" if sc.gpu_metrics else "unavailable: NVML init failed (Driver Not Loaded)",
            capture_started_at=datetime.fromtimestamp(window[0] - 1.0, UTC),
            capture_finished_at=datetime.fromtimestamp(window[1] + 0.2, UTC),
        )
        (folder / MANIFEST_FILE).write_text(manifest.model_dump_json(by_alias=True, indent=1), encoding="utf-8")
    return root
