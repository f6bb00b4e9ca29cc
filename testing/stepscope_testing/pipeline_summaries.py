"""Synthetic per-rank summaries of a pipeline-parallel job (pp x dp, 1F1B), from a timing model of its schedule.

Used by the tests. Each replica runs its stages under 1F1B: stage s does min(S - s - 1, M) warm-up forwards, then
alternates one forward and one backward, then the cool-down backwards; a forward waits for the previous stage's
forward of the same microbatch, a backward for the next stage's backward (the last stage's for its own forward).
Then the replicas of each stage meet in one all_reduce of their gradients: each waits there for the last. Every
rank's recorded step gets its phases: forward and backward (its ops), communication_wait (blocked in receives and
in the all_reduce), other (host time; with `wait_as_host`, the last stage's all_reduce wait is host time instead, as
on GPU ranks whose host thread blocks outside a collective while the device idles). Ranks are numbered stage * dp +
replica and list their process groups as torchtitan's DeviceMesh names them (`mesh_pp`, `mesh_dp`), or unnamed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from stepscope_contract.report import Collective, ProcessGroup, RankReport, StepPhases, StepStats


@dataclass(frozen=True)
class PipeShape:
    pp: int = 2
    dp: int = 2
    microbatches: int = 4
    steps: int = 6
    forward_us: float = 4_000.0
    """one microbatch's forward on one stage; its backward takes twice as long"""
    host_us: float = 1_000.0
    transfer_us: float = 2_000.0
    noise: float = 0.02
    stage_scale: dict[int, float] = field(default_factory=dict)
    """stage -> factor on its compute (a heavy stage)"""
    rank_scale: dict[int, float] = field(default_factory=dict)
    """rank -> factor on its compute (a slow worker)"""
    rank_host: dict[int, float] = field(default_factory=dict)
    """rank -> µs of host work (plain Python) it runs each step after its last backward, before its stage's join"""
    microbatch_spread: float = 0.0
    """each microbatch's work drawn from [1 - spread, 1 + spread] of the mean, per replica and step (lengths)"""
    wait_as_host: bool = False
    names: bool = True
    device: str = "cuda"
    seed: int = 0


def _order(stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    warm = min(stages - stage - 1, micro)
    order = [("F", m) for m in range(warm)]
    f, b = warm, 0
    while b < micro:
        if f < micro:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
        b += 1
    return order


def _replica_step(shape: PipeShape, dur: dict[tuple[int, str, int], float]) -> tuple[list[float], list[float]]:
    """(each stage's end, each stage's busy time) of one replica's 1F1B step; dur: (stage, F|B, microbatch) -> µs."""
    s_n, m_n = shape.pp, shape.microbatches
    done: dict[tuple[int, str, int], float] = {}
    orders = [_order(s, s_n, m_n) for s in range(s_n)]
    pos, free = [0] * s_n, [0.0] * s_n
    while any(pos[s] < len(orders[s]) for s in range(s_n)):
        for s in range(s_n):
            while pos[s] < len(orders[s]):
                kind, m = orders[s][pos[s]]
                dep = (s - 1, "F", m) if kind == "F" else ((s + 1, "B", m) if s < s_n - 1 else (s, "F", m))
                if kind == "F" and s == 0:
                    ready = 0.0
                elif dep in done:
                    ready = done[dep]
                else:
                    break
                start = max(free[s], ready)
                free[s] = done[(s, kind, m)] = start + dur[(s, kind, m)]
                pos[s] += 1
    busy = [sum(v for (s, _, _), v in dur.items() if s == st) for st in range(s_n)]
    return free, busy


def _groups(shape: PipeShape, rank: int) -> list[ProcessGroup]:
    stage, replica = divmod(rank, shape.dp)
    pp_desc, dp_desc = ("mesh_pp", "mesh_dp") if shape.names else ("undefined", "undefined")
    return [
        ProcessGroup(name="0", desc="default_pg"),
        ProcessGroup(name=str(1 + replica), desc=pp_desc, ranks=[s * shape.dp + replica for s in range(shape.pp)]),
        ProcessGroup(
            name=str(1 + shape.dp + stage), desc=dp_desc, ranks=[stage * shape.dp + r for r in range(shape.dp)]
        ),
    ]


def pipeline_job(shape: PipeShape) -> list[RankReport]:
    """The ranks' summaries of the job (see the module docstring)."""
    rng = random.Random(shape.seed)  # noqa: S311 - a seeded workload, not a secret
    world = shape.pp * shape.dp
    phases: dict[int, list[StepPhases]] = {r: [] for r in range(world)}
    durations: list[float] = []
    for _ in range(shape.steps):
        ends: dict[int, float] = {}
        busy: dict[int, float] = {}
        work: dict[int, tuple[float, float]] = {}
        for replica in range(shape.dp):
            dur: dict[tuple[int, str, int], float] = {}
            sizes = [
                1.0 + rng.uniform(-shape.microbatch_spread, shape.microbatch_spread) for _ in range(shape.microbatches)
            ]
            for s in range(shape.pp):
                rank = s * shape.dp + replica
                scale = shape.stage_scale.get(s, 1.0) * shape.rank_scale.get(rank, 1.0)
                for m, size in enumerate(sizes):
                    f = shape.forward_us * scale * size * (1.0 + rng.gauss(0.0, shape.noise))
                    dur[(s, "F", m)], dur[(s, "B", m)] = f, 2.0 * f
                work[rank] = (
                    sum(v for (st, k, _), v in dur.items() if st == s and k == "F"),
                    sum(v for (st, k, _), v in dur.items() if st == s and k == "B"),
                )
            stage_end, stage_busy = _replica_step(shape, dur)
            for s in range(shape.pp):
                rank = s * shape.dp + replica
                ends[rank], busy[rank] = stage_end[s] + shape.rank_host.get(rank, 0.0), stage_busy[s]
        joins = {s: max(ends[s * shape.dp + d] for d in range(shape.dp)) for s in range(shape.pp)}
        step = max(joins.values()) + shape.transfer_us + shape.host_us
        durations.append(step)
        for rank in range(world):
            stage = rank // shape.dp
            extra = shape.rank_host.get(rank, 0.0)
            p2p = ends[rank] - busy[rank] - extra
            join_wait = joins[stage] - ends[rank]
            tail = step - joins[stage] - shape.transfer_us - shape.host_us  # waits for other stages' joins
            as_host = shape.wait_as_host and stage == shape.pp - 1
            blocked = p2p + shape.transfer_us + tail + (0.0 if as_host else join_wait)
            host = shape.host_us + extra + (join_wait if as_host else 0.0)
            fwd, bwd = work[rank]
            phases[rank].append(StepPhases(forward=fwd, backward=bwd, communication_wait=blocked, other=host))
    return [_report(shape, rank, phases[rank], durations) for rank in range(world)]


def _report(shape: PipeShape, rank: int, steps: list[StepPhases], durations: list[float]) -> RankReport:
    n = len(steps)
    compute = sum(p.forward + p.backward for p in steps)
    blocked = sum(p.communication_wait for p in steps)
    covered = n - 1 if shape.device == "cuda" and n > 1 else n  # a GPU summary's collectives leave out the last step
    sends = [Collective(name="nccl:send", count=shape.microbatches * covered, total_us=0.1 * blocked)]
    ordered = sorted(durations)
    return RankReport(
        rank=rank,
        device=shape.device,
        world_size=shape.pp * shape.dp,
        steps=StepStats(
            count=n,
            median_us=ordered[n // 2],
            mean_us=sum(durations) / n,
            min_us=ordered[0],
            max_us=ordered[-1],
            durations_us=list(durations),
            numbers=list(range(n)),
        ),
        compute_time=compute,
        communication_time=blocked,
        window_us=sum(durations),
        job_fingerprint=f"nccl/{shape.pp * shape.dp}/0:default_pg[{shape.pp * shape.dp}]",
        process_groups=_groups(shape, rank),
        collectives=[*sends, Collective(name="nccl:all_reduce", count=covered, total_us=0.9 * blocked)],
        step_phases=steps,
        phases=StepPhases(
            forward=sum(p.forward for p in steps) / n,
            backward=sum(p.backward for p in steps) / n,
            communication_wait=blocked / n,
            other=sum(p.other for p in steps) / n,
        ),
    )
