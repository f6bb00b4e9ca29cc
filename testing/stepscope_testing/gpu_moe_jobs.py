"""Mixture-of-experts GPU jobs (expert parallel over data parallel) as Kineto traces, from a timing model.

Every rank holds the same number of experts and runs, per layer of its forward and backward: the attention's GEMM,
the tokens' dispatch to their experts (an all-to-all), the experts' GEMM, and the combine back (an all-to-all).
What torch.profiler records on a GPU rank with NCCL: a ProfilerStep span per step, the forward
(`## forward ##`) and backward (autograd's `evaluate_function`) regions, each all-to-all as `record_param_comms`
on the host (its args: `Collective name`, `In msg nelems`, `Out msg nelems`, the process group) launching an NCCL
`SendRecv` kernel of the same external id, and the gradients' all_reduce and the optimizer after the backward.

The timing model: an all-to-all completes when its last rank has arrived, so every rank waits in it for the
slowest. A rank's experts' GEMM lasts in proportion to the tokens routed to it (`token_share`, 1.0 = an even
share): a rank holding hot experts receives more in the dispatch (and sends more in the combine) and computes
longer, the others wait in the combine. `rank_scale` makes a rank's GPU slower at everything (a slow worker, the
tokens even).
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEP_GAP_US = 200.0
TOKENS_ELEMS = 4096 * 1024
"""elements one rank sends in a dispatch with an even routing (tokens x hidden size)"""
EXPERT_SKEW = 1.3
"""a rank receiving this many times the median of the tokens is a hot expert rank (the truth)"""


@dataclass(frozen=True)
class GpuMoeJob:
    name: str
    world: int = 8
    layers: int = 4
    steps: int = 6
    attention_us: float = 800.0
    expert_us: float = 1_200.0
    """one layer's experts' forward with an even share of the tokens (the backward: twice as long)"""
    transfer_us: float = 150.0
    token_share: dict[int, float] = field(default_factory=dict)
    rank_scale: dict[int, float] = field(default_factory=dict)
    noise: float = 0.02
    seed: int = 0

    def share(self, rank: int) -> float:
        return self.token_share.get(rank, 1.0)

    def truth(self) -> dict[str, Any]:
        shares = sorted(self.share(r) for r in range(self.world))
        skewed = shares[-1] >= EXPERT_SKEW * shares[len(shares) // 2]
        slow = [{"rank": r, "cause": "compute"} for r, f in sorted(self.rank_scale.items()) if f > 1.0]
        kind = "balanced" if not (slow or skewed) else "moe"
        return {"slow_ranks": slow, "kind": kind, "findings": ["expert_imbalance"] if skewed else []}


class _Trace:
    def __init__(self, rank: int) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr = rank * 10_000_000

    def cpu(self, name: str, cat: str, ts: float, dur: float, args: dict[str, Any] | None = None) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": max(dur, 0.1),
                            "args": args or {}})  # fmt: skip

    def kernel(self, name: str, ts: float, dur: float, stream: int = 7, ext: int | None = None) -> None:
        self.corr += 1
        launch: dict[str, Any] = {"correlation": self.corr}
        args: dict[str, Any] = {"stream": stream, "correlation": self.corr, "device": 0}
        if ext is not None:
            launch["External id"] = args["External id"] = ext
        self.cpu("cudaLaunchKernel", "cuda_runtime", ts - 5.0, 4.0, launch)
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
                            "dur": max(dur, 0.5), "args": args})  # fmt: skip


def _all_to_all(traces: dict[int, _Trace], job: GpuMoeJob, arrive: dict[int, float], sent: dict[int, float]) -> float:
    """One all-to-all every rank joins at `arrive[r]`, sending `sent[r]` elements (even over the ranks) and
    receiving its share of everyone's; returns when it completes for all."""
    done = max(arrive.values()) + job.transfer_us
    total = sum(sent.values())
    weights = {r: job.share(r) for r in traces}
    norm = sum(weights.values())
    for r, t in traces.items():
        t.corr += 1
        ext = t.corr
        recv = total * weights[r] / norm
        args = {"Collective name": "all_to_all", "In msg nelems": int(sent[r]), "Out msg nelems": int(recv),
                "Group size": job.world, "dtype": "BFloat16", "Process Group Name": "1",
                "Process Group Description": "mesh_ep", "External id": ext}  # fmt: skip
        t.cpu("record_param_comms", "cpu_op", arrive[r] - 8.0, 6.0, args)
        t.kernel("ncclDevKernel_SendRecv", arrive[r], done - arrive[r], stream=24, ext=ext)
    return done


def _layer(traces: dict[int, _Trace], job: GpuMoeJob, start: float, factor: float, rng: random.Random) -> float:
    """One layer's forward (factor 1) or backward (factor 2) on every rank; returns its end."""
    scale = {r: job.rank_scale.get(r, 1.0) * (1 + rng.gauss(0, job.noise)) for r in traces}
    arrive = {}
    for r, t in traces.items():
        dur = job.attention_us * factor * scale[r]
        t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", start, dur)
        arrive[r] = start + dur
    even = {r: float(TOKENS_ELEMS) for r in traces}
    dispatched = _all_to_all(traces, job, arrive, even)
    back = {}
    for r, t in traces.items():
        dur = job.expert_us * factor * job.share(r) * scale[r]
        t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_grouped", dispatched, dur)
        back[r] = dispatched + dur
    held = {r: TOKENS_ELEMS * job.share(r) for r in traces}
    return _all_to_all_back(traces, job, back, held)


def _all_to_all_back(
    traces: dict[int, _Trace], job: GpuMoeJob, arrive: dict[int, float], held: dict[int, float]
) -> float:
    """The combine: each rank sends back the tokens its experts computed, each rank receives its own tokens."""
    done = max(arrive.values()) + job.transfer_us
    for r, t in traces.items():
        t.corr += 1
        ext = t.corr
        args = {"Collective name": "all_to_all", "In msg nelems": int(held[r]), "Out msg nelems": TOKENS_ELEMS,
                "Group size": job.world, "dtype": "BFloat16", "Process Group Name": "1",
                "Process Group Description": "mesh_ep", "External id": ext}  # fmt: skip
        t.cpu("record_param_comms", "cpu_op", arrive[r] - 8.0, 6.0, args)
        t.kernel("ncclDevKernel_SendRecv", arrive[r], done - arrive[r], stream=24, ext=ext)
    return done


def write_job(job: GpuMoeJob, out: Path) -> Path:
    """One `rank<R>.pt.trace.json.gz` per rank and truth.json in `out`."""
    rng = random.Random(job.seed)  # noqa: S311 - a seeded workload, not a secret
    traces = {r: _Trace(r) for r in range(job.world)}
    at = 1_000.0
    for step in range(job.steps):
        cursor = at + 50.0
        forward_start = cursor
        for _ in range(job.layers):
            cursor = _layer(traces, job, cursor, 1.0, rng)
        backward_start = cursor
        for _ in range(job.layers):
            cursor = _layer(traces, job, cursor, 2.0, rng)
        for t in traces.values():
            t.cpu("## forward ##", "user_annotation", forward_start - 10.0, backward_start - forward_start + 10.0)
            t.cpu(
                "autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", backward_start, cursor - backward_start
            )
            t.cpu("nccl:all_reduce", "user_annotation", cursor, job.transfer_us * 2)
            t.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", cursor, job.transfer_us * 2, 20)
            t.cpu("Optimizer.step#AdamW.step", "user_annotation", cursor + job.transfer_us * 2, 100.0)
            t.kernel("multi_tensor_apply_kernel", cursor + job.transfer_us * 2 + 5.0, 90.0)
        step_end = cursor + job.transfer_us * 2 + 200.0 - at
        for t in traces.values():
            t.cpu(f"ProfilerStep#{step + 2}", "user_annotation", at, step_end)
        at += step_end + STEP_GAP_US
    out.mkdir(parents=True, exist_ok=True)
    groups = [
        {"pg_name": "0", "pg_desc": "default_pg", "pg_size": job.world, "ranks": list(range(job.world))},
        {"pg_name": "1", "pg_desc": "mesh_ep", "pg_size": job.world, "ranks": list(range(job.world))},
    ]
    for rank, t in traces.items():
        info = {"backend": "nccl", "rank": rank, "world_size": job.world, "pg_count": 2, "pg_config": groups}
        doc = {"schemaVersion": 1, "distributedInfo": info, "baseTimeNanoseconds": 1_790_000_000 * 10**9,
               "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": t.events}  # fmt: skip
        (out / f"rank{rank}.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
    (out / "truth.json").write_text(json.dumps({"job": job.name, **job.truth()}, indent=1))
    return out
