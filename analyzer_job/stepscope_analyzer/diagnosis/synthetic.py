"""Synthetic per-rank summaries of a synchronous data-parallel job, with an optional planted slow rank.

Used by the tests and the reduce benchmark. Each step, every rank computes, stalls on the host and copies
memory, then all ranks meet in an all_reduce: the ranks that finish early wait there for the last one.
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


def synthetic_job(
    shape: JobShape = JobShape(),
    *,
    slow_rank: int | None = None,
    cause: Cause | None = None,
    extra_us: float = 0.0,
    noise: float = 0.02,
    seed: int = 0,
    measured_wait: bool = True,
) -> list[RankReport]:
    """Per-rank summaries; `extra_us` per step is added to `slow_rank`'s `cause` (compute/host/memory/comm)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not security

    def jitter(x: float) -> float:
        return max(0.0, x * (1.0 + rng.gauss(0.0, noise)))

    own: list[dict[str, float]] = []
    for r in range(shape.world_size):
        parts = {
            "compute": jitter(shape.compute_us),
            "host": jitter(shape.host_us),
            "memory": jitter(shape.memory_us),
            "transfer": jitter(shape.transfer_us),
            "slow_kernel": 0.0,
        }
        if r == slow_rank and cause is not None:
            key = {Cause.COMPUTE: "compute", Cause.HOST: "host", Cause.MEMORY: "memory"}.get(cause, "transfer")
            parts[key] += extra_us
            if cause is Cause.COMPUTE:
                parts["slow_kernel"] = extra_us
        own.append(parts)
    arrive = [p["compute"] + p["host"] + p["memory"] for p in own]
    slowest_transfer = max(p["transfer"] for p in own)
    step_us = max(arrive) + slowest_transfer
    out: list[RankReport] = []
    for r, p in enumerate(own):
        wait = step_us - arrive[r] - p["transfer"]
        comm = p["transfer"] + wait
        n = shape.steps
        kernels = [
            KernelStat(
                name="sm90_gemm_bf16_128x256",
                kernel_type="COMPUTATION",
                count=40 * n,
                sum_us=(p["compute"] - p["slow_kernel"]) * n * 0.7,
                mean_us=1.0,
                max_us=1.0,
                min_us=1.0,
                stddev=0.0,
            ),
            KernelStat(
                name="elementwise_kernel<add>",
                kernel_type="COMPUTATION",
                count=80 * n,
                sum_us=(p["compute"] - p["slow_kernel"]) * n * 0.3,
                mean_us=1.0,
                max_us=1.0,
                min_us=1.0,
                stddev=0.0,
            ),
            KernelStat(
                name="Memcpy HtoD (Pageable -> Device)",
                kernel_type="MEMORY",
                count=4 * n,
                sum_us=p["memory"] * n,
                mean_us=1.0,
                max_us=1.0,
                min_us=1.0,
                stddev=0.0,
            ),
            KernelStat(
                name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                kernel_type="COMMUNICATION",
                count=2 * n,
                sum_us=comm * n,
                mean_us=1.0,
                max_us=1.0,
                min_us=1.0,
                stddev=0.0,
            ),
        ]
        if p["slow_kernel"] > 0:
            kernels.append(
                KernelStat(
                    name="attention_fwd_kernel_slowpath",
                    kernel_type="COMPUTATION",
                    count=n,
                    sum_us=p["slow_kernel"] * n,
                    mean_us=p["slow_kernel"],
                    max_us=p["slow_kernel"],
                    min_us=p["slow_kernel"],
                    stddev=0.0,
                )
            )
        window = step_us * n
        functions = [
            Bottleneck(
                name="torch/utils/data/dataloader.py(631): __next__",
                category="python",
                count=n,
                total_us=p["host"] * n,
                mean_us=p["host"],
                bottleneck_ratio=p["host"] * n / window,
            ),
            Bottleneck(
                name="cudaMemcpyAsync",
                category="runtime",
                count=4 * n,
                total_us=p["memory"] * n * 0.5,
                mean_us=1.0,
                bottleneck_ratio=0.01,
            ),
            Bottleneck(
                name="Memcpy HtoD (Pageable -> Device)",
                category="memory",
                count=4 * n,
                total_us=p["memory"] * n,
                mean_us=1.0,
                bottleneck_ratio=p["memory"] * n / window,
            ),
            Bottleneck(
                name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                category="communication",
                count=2 * n,
                total_us=comm * n,
                mean_us=comm / 2,
                bottleneck_ratio=comm * n / window,
            ),
        ]
        idle = p["host"] * n
        compute_time = p["compute"] * n
        non_compute = (p["memory"] + comm) * n
        durations = [jitter(step_us) if noise else step_us for _ in range(n)]
        durations.sort()
        med = durations[len(durations) // 2]
        out.append(
            RankReport(
                rank=r,
                node=f"node-{r // max(shape.ranks_per_node, 1)}",
                pod=f"trainer-{r}",
                device=shape.device,
                world_size=shape.world_size,
                steps=StepStats(
                    count=n,
                    median_us=med,
                    mean_us=sum(durations) / n,
                    min_us=durations[0],
                    max_us=durations[-1],
                    spread_pct=100.0 * (durations[-1] - durations[0]) / med,
                    durations_us=durations,
                ),
                idle_time=idle,
                compute_time=compute_time,
                non_compute_time=non_compute,
                kernel_time=window,
                window_us=window,
                idle_time_pctg=100.0 * idle / window,
                compute_time_pctg=100.0 * compute_time / window,
                non_compute_time_pctg=100.0 * non_compute / window,
                comp_comm_overlap_pctg=5.0,
                gpu_utilization=(window - idle) / window,
                communication_time=comm * n,
                memory_time=p["memory"] * n,
                exposed_communication_time=comm * n * 0.95,
                collective_wait_time=wait * n if measured_wait else 0.0,
                host_gap_time=p["host"] * n * 0.8,
                top_kernels=kernels,
                top_functions=functions,
                collectives=[
                    Collective(
                        name="allreduce",
                        process_group="0:default_pg",
                        count=2 * n,
                        total_us=comm * n,
                        exposed_us=comm * n * 0.95,
                        wait_us=wait * n if measured_wait else 0.0,
                    )
                ],
            )
        )
    return out
