"""3D-parallel GPU jobs (pipeline x data x tensor parallel) as Kineto traces, from a timing model of a 1F1B step.

Each rank's trace is what torch.profiler records on a GPU rank with NCCL: a ProfilerStep span per step on the host
thread, the launches (`cudaLaunchKernel`) of every kernel inside the forward (`## forward ##`) or backward
(autograd's `evaluate_function`) region of its microbatch, and the kernels on the GPU's streams; its
`distributedInfo.pg_config` lists the groups it belongs to, named as torchtitan's DeviceMesh names them (`mesh_pp`,
`mesh_dp`, `mesh_tp`). Ranks are numbered stage * (dp * tp) + replica * tp + TP position.

The timing model: every replica runs its stages under 1F1B (stage s: min(S - s - 1, M) warm-up forwards, then one
forward and one backward in turn, then the cool-down backwards); a forward waits for the previous stage's forward of
its microbatch, a backward for the next stage's backward. Within a stage, the TP group's ranks compute each op and
meet in an all_reduce per layer: the op lasts as long as its slowest TP rank, the others wait in the all_reduce
kernel. A stage waiting for its neighbour sits in an NCCL SendRecv kernel (the receive); each communication kernel
carries the args PyTorch records for NCCL (collective, process group, the peer of a send or receive). After the last
backward, the replicas of each stage meet in the gradients' all_reduce; the step ends for everyone when the last
stage group has. Faults: `stage_scale` (a heavy stage), `rank_scale` (a slow GPU), `microbatch_spread` (work per
microbatch drawn per replica and step: sequence lengths); with `wait_on_host` the last stage waits for its replicas
outside any collective, GPU idle, host blocked in `cudaStreamSynchronize`.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEP_GAP_US = 200.0
STAGE_IMBALANCE = 1.3
"""a stage whose work is this many times the others' is imbalanced (the truth)"""
LAYERS = 2


@dataclass(frozen=True)
class GpuPipeJob:
    name: str
    pp: int
    dp: int
    tp: int = 1
    microbatches: int = 8
    steps: int = 6
    forward_us: float = 3_000.0
    """one microbatch's forward on one stage (its backward: twice as long)"""
    transfer_us: float = 300.0
    stage_scale: dict[int, float] = field(default_factory=dict)
    rank_scale: dict[int, float] = field(default_factory=dict)
    microbatch_spread: float = 0.0
    wait_on_host: bool = False
    """the last stage waits for its replicas with its GPU idle and its host thread blocked in a synchronisation
    (outside any collective) before their all_reduce"""
    noise: float = 0.01
    seed: int = 0

    @property
    def world(self) -> int:
        return self.pp * self.dp * self.tp

    def rank(self, stage: int, replica: int, tp: int) -> int:
        return stage * self.dp * self.tp + replica * self.tp + tp

    def truth(self) -> dict[str, Any]:
        findings = []
        if max(self.stage_scale.values(), default=1.0) >= STAGE_IMBALANCE:
            findings.append("stage_imbalance")
        if self.microbatch_spread > 0:
            findings.append("data_imbalance")
        if (self.pp - 1) / (self.microbatches + self.pp - 1) >= 1 / 3:
            findings.append("pipeline_bubble")
        slow = [{"rank": r, "cause": "compute"} for r, f in sorted(self.rank_scale.items()) if f > 1.0]
        if self.tp > 1 and slow:
            findings.append("tp_straggler")
        kind = "balanced" if not (slow or findings) else "pipeline"
        layout = {"stages": self.pp, "replicas": self.dp}
        return {"slow_ranks": slow, "kind": kind, "findings": sorted(findings), "layout": layout}


@dataclass
class _Op:
    kind: str
    micro: int
    start: float
    end: float
    own: dict[int, float]
    """TP rank -> its own compute time in the op"""


def _order(stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    warm = min(stages - stage - 1, micro)
    order = [("F", m) for m in range(warm)]
    f = warm
    for b in range(micro):
        if f < micro:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
    return order


def _replica(job: GpuPipeJob, replica: int, rng: random.Random) -> list[list[_Op]]:
    """Each stage's ops of one replica's step, timed (see the module docstring)."""
    sizes = [1.0 + rng.uniform(-job.microbatch_spread, job.microbatch_spread) for _ in range(job.microbatches)]
    orders = [_order(s, job.pp, job.microbatches) for s in range(job.pp)]
    done: dict[tuple[int, str, int], float] = {}
    ops: list[list[_Op]] = [[] for _ in range(job.pp)]
    pos, free = [0] * job.pp, [0.0] * job.pp
    progress = True
    while progress:
        progress = False
        for s in range(job.pp):
            while pos[s] < len(orders[s]):
                kind, m = orders[s][pos[s]]
                first = kind == "F" and s == 0
                dep = (s - 1, "F", m) if kind == "F" else ((s + 1, "B", m) if s < job.pp - 1 else (s, "F", m))
                if not first and dep not in done:
                    break
                start = max(free[s], 0.0 if first else done[dep] + job.transfer_us)
                base = job.forward_us * (1 if kind == "F" else 2) * sizes[m] * job.stage_scale.get(s, 1.0)
                own = {
                    t: base * job.rank_scale.get(job.rank(s, replica, t), 1.0) * (1 + rng.gauss(0, job.noise))
                    for t in range(job.tp)
                }
                end = start + max(own.values()) + (job.transfer_us * LAYERS if job.tp > 1 else 0.0)
                ops[s].append(_Op(kind, m, start, end, own))
                free[s] = done[(s, kind, m)] = end
                pos[s] += 1
                progress = True
    return ops


class _Trace:
    def __init__(self, job: GpuPipeJob, rank: int) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr = rank * 10_000_000
        self.job, self.rank = job, rank

    def cpu(self, name: str, cat: str, ts: float, dur: float, args: dict[str, Any] | None = None) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": max(dur, 0.1),
                            "args": args or {}})  # fmt: skip

    def kernel(self, name: str, ts: float, dur: float, stream: int = 7, comm: dict[str, Any] | None = None) -> None:
        """A kernel with its launch a few µs before it on the host thread (`comm`: a communication kernel's args)."""
        self.corr += 1
        self.cpu("cudaLaunchKernel", "cuda_runtime", ts - 5.0, 4.0, {"correlation": self.corr})
        args = {"stream": stream, "correlation": self.corr, "device": 0, **(comm or {})}
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
                            "dur": max(dur, 0.5), "args": args})  # fmt: skip


def _comm(t: _Trace, op: str, dim: str, peer: int | None = None) -> dict[str, Any]:
    """A communication kernel's args as PyTorch records them for NCCL: the collective, its process group and, for a
    send or receive, the other end's global rank."""
    groups = {g["pg_desc"]: g for g in _pg_config(t.job, t.rank)}
    group = groups.get(f"mesh_{dim}", groups["default_pg"])
    args = {"Collective name": op, "Process Group Name": group["pg_name"], "Process Group Description":
            group["pg_desc"], "Process Group Ranks": str(group["ranks"]), "Group size": group["pg_size"]}  # fmt: skip
    if peer is not None:
        args["Dst Rank" if op == "send" else "Src Rank"] = peer
    return args


def _op_events(t: _Trace, op: _Op, tp_pos: int, at: float) -> None:
    """One microbatch's forward or backward on one rank: its region, its compute kernels, the TP all_reduces."""
    own = op.own[tp_pos]
    start, dur = at + op.start, op.end - op.start
    region = "## forward ##" if op.kind == "F" else "autograd::engine::evaluate_function: AddmmBackward0"
    t.cpu(region, "user_annotation" if op.kind == "F" else "cpu_op", start - 10.0, dur + 10.0)
    cursor, layer_wait = start, (dur - own) / LAYERS
    for _ in range(LAYERS):
        t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", cursor, own / LAYERS)
        cursor += own / LAYERS
        if t.job.tp > 1:
            t.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", cursor, layer_wait, 20, _comm(t, "allreduce", "tp"))
            cursor += layer_wait


def _stage_events(t: _Trace, where: tuple[int, int], ops: list[_Op], at: float, ends: tuple[float, float]) -> None:
    """One rank's step: each op after its receive (waiting for the neighbour stage inside it), its send after it,
    then the gradients' all_reduce with the stage's other replicas and the optimizer."""
    (stage, tp_pos), (stage_end, join) = where, ends
    last = stage == t.job.pp - 1
    replica = t.rank % (t.job.dp * t.job.tp) // t.job.tp
    cursor = 0.0
    for op in ops:
        if (op.kind == "F" and stage > 0) or (op.kind == "B" and not last):
            src = t.job.rank(stage - 1 if op.kind == "F" else stage + 1, replica, tp_pos)
            recv = _comm(t, "recv", "pp", src)
            t.kernel("ncclDevKernel_SendRecv", at + cursor, max(op.start - cursor, 5.0), 24, recv)
        _op_events(t, op, tp_pos, at)
        if (op.kind == "F" and not last) or (op.kind == "B" and stage > 0):
            dst = t.job.rank(stage + 1 if op.kind == "F" else stage - 1, replica, tp_pos)
            t.kernel("ncclDevKernel_SendRecv", at + op.end, 5.0, 24, _comm(t, "send", "pp", dst))
        cursor = op.end
    if t.job.wait_on_host and last and join - stage_end > 1.0:
        t.cpu("cudaStreamSynchronize", "cuda_runtime", at + stage_end, join - stage_end)
        stage_end = join
    t.cpu("nccl:all_reduce", "user_annotation", at + stage_end, join - stage_end + t.job.transfer_us)
    grads = _comm(t, "allreduce", "dp")
    t.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", at + stage_end, join - stage_end + t.job.transfer_us, 20, grads)
    t.cpu("Optimizer.step#AdamW.step", "user_annotation", at + join + t.job.transfer_us, 100.0)
    t.kernel("multi_tensor_apply_kernel", at + join + t.job.transfer_us + 5.0, 90.0)


def _pg_config(job: GpuPipeJob, rank: int) -> list[dict[str, Any]]:
    stage, rest = divmod(rank, job.dp * job.tp)
    replica, tp_pos = divmod(rest, job.tp)
    groups = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": job.world, "ranks": list(range(job.world))}]
    dims = {
        "pp": [job.rank(s, replica, tp_pos) for s in range(job.pp)],
        "dp": [job.rank(stage, d, tp_pos) for d in range(job.dp)],
        "tp": [job.rank(stage, replica, t) for t in range(job.tp)],
    }
    for dim, members in dims.items():
        if len(members) > 1:
            groups.append({"pg_name": f"{dim}{min(members)}", "pg_desc": f"mesh_{dim}", "pg_size": len(members),
                           "ranks": members})  # fmt: skip
    return groups


def write_job(job: GpuPipeJob, out: Path) -> Path:
    """One `rank<R>.pt.trace.json.gz` per rank and truth.json in `out`."""
    rng = random.Random(job.seed)  # noqa: S311 - a seeded workload, not a secret
    traces = {r: _Trace(job, r) for r in range(job.world)}
    at = 1_000.0
    for step in range(job.steps):
        replicas = [_replica(job, d, rng) for d in range(job.dp)]
        ends = {(s, d): replicas[d][s][-1].end for d in range(job.dp) for s in range(job.pp)}
        joins = {s: max(ends[(s, d)] for d in range(job.dp)) for s in range(job.pp)}
        step_end = max(joins.values()) + job.transfer_us + 200.0
        for s in range(job.pp):
            for d in range(job.dp):
                for tp_pos in range(job.tp):
                    t = traces[job.rank(s, d, tp_pos)]
                    t.cpu(f"ProfilerStep#{step + 2}", "user_annotation", at, step_end)
                    _stage_events(t, (s, tp_pos), replicas[d][s], at, (ends[(s, d)], joins[s]))
        at += step_end + STEP_GAP_US
    out.mkdir(parents=True, exist_ok=True)
    for rank, t in traces.items():
        info = {"backend": "nccl", "rank": rank, "world_size": job.world, "pg_count": 4,
                "pg_config": _pg_config(job, rank)}  # fmt: skip
        doc = {"schemaVersion": 1, "distributedInfo": info, "baseTimeNanoseconds": 1_790_000_000 * 10**9,
               "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": t.events}  # fmt: skip
        (out / f"rank{rank}.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
    (out / "truth.json").write_text(json.dumps({"job": job.name, **job.truth()}, indent=1))
    return out
