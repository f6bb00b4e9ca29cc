"""Synthetic per-rank summaries of a synchronous data-parallel job, with an optional planted slow rank.

Used by the tests and the reduce benchmark. Each step, every rank computes, stalls on the host and copies memory,
then all ranks meet in an all_reduce: the ranks that finish early wait there for the last one. Every step is drawn
on its own (noise per rank and step), so the summaries carry per-step phases as real ones do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from stepscope_contract.report import (
    Bottleneck,
    Cause,
    Collective,
    KernelStat,
    RankReport,
    StepPhases,
    StepStats,
)


@dataclass(frozen=True)
class JobShape:
    world_size: int = 8
    steps: int = 5
    compute_us: float = 60_000.0
    host_us: float = 5_000.0
    memory_us: float = 3_000.0
    transfer_us: float = 10_000.0
    ranks_per_node: int = 4
    device: str = "cuda"


_PARTS = ("compute", "host", "memory", "transfer")


def _kernel(name: str, kind: str, count: int, total: float) -> KernelStat:
    return KernelStat(
        name=name, kernel_type=kind, count=count, sum_us=total, mean_us=1.0, max_us=1.0, min_us=1.0, stddev=0.0
    )


def _function(name: str, category: str, count: int, total: float, ratio: float) -> Bottleneck:
    return Bottleneck(name=name, category=category, count=count, total_us=total, mean_us=total / max(count, 1),
                      bottleneck_ratio=ratio)  # fmt: skip


def _draw_steps(
    shape: JobShape, rng: random.Random, noise: float, planted: dict[int, dict[str, float]], every: int = 1
) -> list[list[dict[str, float]]]:
    """[step][rank] -> parts (compute, host, memory, transfer, wait) of one synchronous step; the planted extras
    land on every `every`-th step (from the first)."""
    steps: list[list[dict[str, float]]] = []
    for step in range(shape.steps):
        own = []
        for r in range(shape.world_size):
            base = {k: getattr(shape, f"{k}_us") for k in _PARTS}
            parts = {k: max(0.0, v * (1.0 + rng.gauss(0.0, noise))) for k, v in base.items()}
            for k, extra in planted.get(r, {}).items():
                parts[k] += extra if step % every == 0 else 0.0
            own.append(parts)
        arrive = [p["compute"] + p["host"] + p["memory"] for p in own]
        step_us = max(arrive) + max(p["transfer"] for p in own)
        for r, p in enumerate(own):
            p["wait"] = step_us - arrive[r] - p["transfer"]
            p["step"] = step_us
        steps.append(own)
    return steps


def _rank_report(
    shape: JobShape, r: int, rows: list[dict[str, float]], slow_kernel_us: float, measured_wait: bool
) -> RankReport:
    n = len(rows)

    def total(key: str) -> float:
        return sum(p[key] for p in rows)

    compute, host, memory, transfer, wait = (total(k) for k in ("compute", "host", "memory", "transfer", "wait"))
    comm = transfer + wait
    window = total("step")
    kernels = [
        _kernel("sm90_gemm_bf16_128x256", "COMPUTATION", 40 * n, (compute - slow_kernel_us * n) * 0.7),
        _kernel("elementwise_kernel<add>", "COMPUTATION", 80 * n, (compute - slow_kernel_us * n) * 0.3),
        _kernel("Memcpy HtoD (Pageable -> Device)", "MEMORY", 4 * n, memory),
        _kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "COMMUNICATION", 2 * n, comm),
    ]
    if slow_kernel_us > 0:
        kernels.append(_kernel("attention_fwd_kernel_slowpath", "COMPUTATION", n, slow_kernel_us * n))
    functions = [
        _function("torch/utils/data/dataloader.py(631): __next__", "python", n, host, host / window),
        _function("cudaMemcpyAsync", "runtime", 4 * n, memory * 0.5, 0.01),
        _function("Memcpy HtoD (Pageable -> Device)", "memory", 4 * n, memory, memory / window),
        _function("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "communication", 2 * n, comm, comm / window),
    ]
    phases = [
        StepPhases(
            data_loading=p["host"],
            forward=0.35 * p["compute"] + p["memory"],
            backward=0.6 * p["compute"],
            optimizer=0.05 * p["compute"],
            communication_wait=p["transfer"] + p["wait"],
            other=0.0,
        )
        for p in rows
    ]
    durations = [p["step"] for p in rows]
    ordered = sorted(durations)
    med = ordered[n // 2]
    return RankReport(
        rank=r,
        node=f"node-{r // max(shape.ranks_per_node, 1)}",
        pod=f"trainer-{r}",
        device=shape.device,
        world_size=shape.world_size,
        steps=StepStats(
            count=n,
            median_us=med,
            mean_us=window / n,
            min_us=ordered[0],
            max_us=ordered[-1],
            spread_pct=100.0 * (ordered[-1] - ordered[0]) / med,
            durations_us=durations,
        ),
        idle_time=host,
        compute_time=compute,
        non_compute_time=memory + comm,
        kernel_time=window,
        window_us=window,
        idle_time_pctg=100.0 * host / window,
        compute_time_pctg=100.0 * compute / window,
        non_compute_time_pctg=100.0 * (memory + comm) / window,
        comp_comm_overlap_pctg=5.0,
        gpu_utilization=(window - host) / window,
        communication_time=comm,
        memory_time=memory,
        exposed_communication_time=comm * 0.95,
        collective_wait_time=wait if measured_wait else 0.0,
        host_gap_time=host * 0.8,
        host_time=host,
        top_kernels=kernels,
        top_functions=functions,
        collectives=[
            Collective(
                name="allreduce",
                process_group="0:default_pg",
                count=2 * n,
                total_us=comm,
                exposed_us=comm * 0.95,
                wait_us=wait if measured_wait else 0.0,
            )
        ],
        phases=StepPhases(**{k: sum(getattr(p, k) for p in phases) / n for k in StepPhases.model_fields}),
        step_phases=phases,
    )


def synthetic_job(
    shape: JobShape = JobShape(),
    *,
    slow_rank: int | None = None,
    cause: Cause | None = None,
    extra_us: float = 0.0,
    noise: float = 0.02,
    seed: int = 0,
    measured_wait: bool = False,
    extra: dict[int, dict[str, float]] | None = None,
    every: int = 1,
) -> list[RankReport]:
    """Per-rank summaries; `extra_us` per step is added to `slow_rank`'s `cause` (compute/host/memory/comm).

    `measured_wait`: the summaries carry a direct measure of each rank's wait (as no real trace does today);
    otherwise the diagnosis estimates it across ranks. `extra`: rank -> part (compute, host, memory, transfer) ->
    µs per step added, for several slow ranks at once. `every`: the extras land on every `every`-th step only (an
    intermittent stall when above 1)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not security
    planted: dict[int, dict[str, float]] = {r: dict(parts) for r, parts in (extra or {}).items()}
    if slow_rank is not None and cause is not None:
        key = {Cause.COMPUTE: "compute", Cause.HOST: "host", Cause.MEMORY: "memory"}.get(cause, "transfer")
        planted[slow_rank] = {key: extra_us}
    steps = _draw_steps(shape, rng, noise, planted, every)
    out = []
    for r in range(shape.world_size):
        slow_kernel = extra_us if (r == slow_rank and cause is Cause.COMPUTE) else 0.0
        out.append(_rank_report(shape, r, [s[r] for s in steps], slow_kernel, measured_wait))
    return out
