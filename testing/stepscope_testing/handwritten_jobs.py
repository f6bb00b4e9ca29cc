"""Real CPU trainings written apart from the corpus' generators, to test the diagnosis on jobs its thresholds were
not fitted on: another model (residual LayerNorm-GELU blocks on [batch, width] rows), another rank order for
pipelines (replica-major: rank = replica * pp + stage, as DeepSpeed numbers a pipeline's ranks), DistributedDataParallel
for data parallelism, and the faults planted in other ways than stepscope_testing.gloo_jobs and pipeline_jobs plant
them. Recorded with plain torch.profiler (`tensorboard_trace_handler`) by torch.multiprocessing processes over gloo.

One `HandJob` is one job of `pp` x `dp` processes (`pp` 1: data parallel under DDP). Faults (`fault`):
- `none`: healthy;
- `twice` (pipelines): rank `slow_rank` applies each of its blocks twice (its forward and backward about double);
- `split` (pipelines): the stages hold `layers` blocks each, as listed (badly split: stage_imbalance);
- `rows` (data parallel): rank `slow_rank` trains on `amount` times the rows of the others per step (a compute
  straggler of `amount` - 1);
- `python`: rank `slow_rank` spends `amount` ms of CPU time per step in plain Python before its step's work (a host
  straggler: no op runs meanwhile);
- `slow` (tensor parallel): rank `slow_rank` runs its share of every block's products (its shards, no collective)
  `amount` more times in the forward and drops the results, as a slower device would take longer: its TP group
  waits for it in every block's all-reduce (a TP straggler).
With `tp` > 1 the job is `dp` x `tp` ranks (rank = replica * tp + position) over a DeviceMesh ("dp", "tp"): each
block's first product column-wise and its second row-wise (DTensor's ColwiseParallel and RowwiseParallel), the
replicas' gradients all-reduced over "dp".
Pipelines run one of three schedules (`schedule`): `1f1b` (one stage per rank), `gpipe` (every forward, then every
backward) or `interleaved` (interleaved 1F1B: each rank holds VIRTUAL stages, rank p the stages p, p + pp, ..., its
blocks split evenly among them; the last stage, which holds the head, is on the last rank).
With `calibrate` > 0 the job then runs that many cycles of unprofiled steps with the fault switched off and on in
turn (stepscope_testing.planted_cost), and truth.json gets what the fault costs the job per step (`planted_cost`):
the recorded steps are the same with or without it. `split` has no calibration (its layers cannot be moved
between steps).
Run as a script: `python -m stepscope_testing.handwritten_jobs OUT --fault ... `.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stepscope_testing.planted_cost import ORDER, armed
from stepscope_testing.spawned_jobs import CALIBRATION, run_spawned, spawn_workers

FAULTS = ("none", "twice", "split", "rows", "python", "slow")
SCHEDULES = ("1f1b", "gpipe", "interleaved")
VIRTUAL = 2
"""stages per rank under the interleaved schedule"""
WIDTH = 96
_FAULT_ON = [True]
"""whether the planted fault acts in this process's current step (off in half of the calibration's steps)"""


@dataclass(frozen=True)
class HandJob:
    name: str
    pp: int = 1
    dp: int = 4
    fault: str = "none"
    slow_rank: int = -1
    amount: float = 0.0
    layers: tuple[int, ...] = (3, 3)
    """blocks per stage (data parallel: the first entry)"""
    steps: int = 5
    microbatches: int = 4
    rows: int = 64
    width: int = WIDTH
    """the blocks' width: at the default the per-op overhead outweighs the products' arithmetic, wider the products
    dominate a step (a `rows` fault then adds about `amount` - 1 to the rank's work)"""
    seed: int = 7
    generator: str = field(default="handwritten_jobs")
    schedule: str = "1f1b"
    """pipelines: 1f1b, gpipe or interleaved (SCHEDULES)"""
    tp: int = 1
    calibrate: int = 0
    """cycles of calibration steps after the recorded ones (module docstring); 0: none"""

    @property
    def world(self) -> int:
        return self.pp * self.dp * self.tp

    def rank_of(self, stage: int, replica: int) -> int:
        return replica * self.pp + stage

    def truth(self) -> dict[str, Any]:
        """What a correct diagnosis names: the slow rank and its cause, the pipeline's findings and layout."""
        cause = {"twice": "compute", "rows": "compute", "python": "host", "slow": "compute"}.get(self.fault)
        slow = [{"rank": self.slow_rank, "cause": cause}] if cause else []
        out: dict[str, Any] = {"slow_ranks": slow, "kind": "balanced" if self.fault == "none" else self.fault}
        if self.tp > 1:
            tp_findings = ["tp_straggler"] if cause == "compute" else []  # a rank computing more than its TP group
            out |= {"findings": tp_findings, "layout": {"stages": 1, "replicas": self.dp, "tp": self.tp}}
        if self.pp > 1:
            findings = ["stage_imbalance"] if self.fault == "split" else []
            chunks = VIRTUAL if self.schedule == "interleaved" else 1
            if (self.pp - 1) / (chunks * self.microbatches + self.pp - 1) >= 1 / 3:
                findings.append("pipeline_bubble")
            out |= {"findings": sorted(findings), "layout": {"stages": self.pp, "replicas": self.dp}}
        return out

    def wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _model(job: HandJob, rank: int, blocks: int, head: bool) -> Any:
    import torch
    from torch import nn

    width = job.width
    repeat = 2 if job.fault == "twice" and rank == job.slow_rank else 1

    class Blocks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(blocks))
            self.mlps = nn.ModuleList(
                nn.Sequential(nn.Linear(width, 3 * width), nn.GELU(), nn.Linear(3 * width, width))
                for _ in range(blocks)
            )
            self.head = nn.Linear(width, 8) if head else None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for norm, mlp in zip(self.norms, self.mlps, strict=True):
                for _ in range(repeat if _FAULT_ON[0] else 1):
                    x = x + mlp(norm(x))
            return self.head(x) if self.head is not None else x

    return Blocks()


def _host_work(job: HandJob, rank: int) -> None:
    """`python`: the slow rank's plain-Python work, a fixed amount of this thread's CPU time (`amount` ms)."""
    if job.fault != "python" or rank != job.slow_rank or not _FAULT_ON[0]:
        return
    until = time.thread_time() + job.amount / 1000
    table: dict[int, int] = {}
    while time.thread_time() < until:
        for k in range(256):
            table[k] = (table.get(k, 1) * 48271 + k) % 2_147_483_647


def _batch(job: HandJob, rank: int, gen: Any, rows: int) -> tuple[Any, Any]:
    """One step's inputs and labels, after the rank's host work (`python`)."""
    import torch

    x = torch.randn(rows, job.width, generator=gen)
    y = torch.randint(0, 8, (rows,), generator=gen)
    _host_work(job, rank)
    return x, y


def _average(params: list[Any], group: Any, replicas: int) -> None:
    """The replicas' gradients averaged, parameter by parameter (a DTensor's own shard)."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    for p in params:
        if p.grad is not None:
            local = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
            dist.all_reduce(local, group=group)
            local /= replicas


def _profiler(job: HandJob, out: str) -> Any:
    import torch

    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=job.steps, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(out, use_gzip=True),
    )


def _train(job: HandJob, rank: int, out: str, step: Callable[[], None]) -> None:
    """The recorded steps under the profiler, then the calibration's (rank 0 times them and leaves them beside the
    job's folder, where run_spawned reads them)."""
    with _profiler(job, out) as prof:
        for _ in range(job.steps + 2):
            step()
            prof.step()
    if job.calibrate <= 0 or job.fault in ("none", "split"):
        return
    times: list[float] = []
    for i in range(-1, job.calibrate * len(ORDER)):  # one step first with the fault on, not timed
        _FAULT_ON[0] = i < 0 or armed(i)
        started = time.perf_counter()
        step()
        if i >= 0:
            times.append((time.perf_counter() - started) * 1e6)
    _FAULT_ON[0] = True
    if rank == 0:
        Path(out).parent.joinpath(CALIBRATION.format(name=Path(out).name)).write_text(json.dumps(times))


def _data_parallel(job: HandJob, rank: int, out: str) -> None:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(_model(job, rank, job.layers[0], head=True))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rows = round(job.rows * job.amount) if job.fault == "rows" and rank == job.slow_rank else job.rows
    gen = torch.Generator().manual_seed(job.seed + rank)

    def step() -> None:
        x, y = _batch(job, rank, gen, rows if _FAULT_ON[0] else job.rows)
        opt.zero_grad(set_to_none=True)
        loss: Any = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    _train(job, rank, out, step)


def _chunks(blocks: int, parts: int) -> list[int]:
    """`blocks` split as evenly as `parts` stages can hold them, the first ones one more where they do not divide."""
    return [blocks // parts + (1 if i < blocks % parts else 0) for i in range(parts)]


def _schedule(job: HandJob, rank: int, stage: int, group: Any) -> tuple[Any, list[Any], bool, bool]:
    """(schedule, the rank's modules, whether it feeds the inputs, whether it holds the loss) under job.schedule."""
    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    loss = torch.nn.CrossEntropyLoss()
    last = stage == job.pp - 1
    if job.schedule != "interleaved":
        module = _model(job, rank, job.layers[stage], head=last)
        pipe = PipelineStage(module, stage, job.pp, torch.device("cpu"), group=group)
        kind = ScheduleGPipe if job.schedule == "gpipe" else Schedule1F1B
        return kind(pipe, job.microbatches, loss_fn=loss), [module], stage == 0, last
    total = job.pp * VIRTUAL
    modules: list[Any] = []
    stages: list[Any] = []
    for chunk, blocks in enumerate(_chunks(job.layers[stage], VIRTUAL)):
        index = chunk * job.pp + stage
        module = _model(job, rank, blocks, head=index == total - 1)
        modules.append(module)
        stages.append(PipelineStage(module, index, total, torch.device("cpu"), group=group))
    return ScheduleInterleaved1F1B(stages, job.microbatches, loss_fn=loss), modules, stage == 0, last


def _pipeline(job: HandJob, rank: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    replica, stage = divmod(rank, job.pp)
    pipes = [dist.new_group([job.rank_of(s, d) for s in range(job.pp)]) for d in range(job.dp)]
    reps = [dist.new_group([job.rank_of(s, d) for d in range(job.dp)]) for s in range(job.pp)]
    schedule, modules, first, last = _schedule(job, rank, stage, pipes[replica])
    params = [p for m in modules for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    gen = torch.Generator().manual_seed(job.seed + replica)

    def step() -> None:
        x, y = _batch(job, rank, gen, job.rows)
        opt.zero_grad(set_to_none=True)
        if first:
            schedule.step(x, target=y) if last else schedule.step(x)
        else:
            schedule.step(target=y) if last else schedule.step()
        _average(params, reps[stage], job.dp)
        opt.step()

    _train(job, rank, out, step)


def _slower(mlp: Any, times: int, _module: Any, args: tuple[Any, ...]) -> None:
    """`slow`: the rank's own share of the block's products (its shards, no collective) `times` more, results
    dropped: the time a slower device would take."""
    import torch
    import torch.nn.functional as F

    if not _FAULT_ON[0]:
        return
    first, second = mlp[0], mlp[2]
    with torch.no_grad():
        for _ in range(times):
            h = F.gelu(F.linear(args[0], first.weight.to_local(), first.bias.to_local()))
            F.linear(h, second.weight.to_local())


def _tensor_parallel(job: HandJob, rank: int, out: str) -> None:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (job.dp, job.tp), mesh_dim_names=("dp", "tp"))
    model = _model(job, rank, job.layers[0], head=True)
    plan: dict[str, Any] = {}
    for i in range(job.layers[0]):
        plan |= {f"mlps.{i}.0": ColwiseParallel(), f"mlps.{i}.2": RowwiseParallel()}
    parallelize_module(model, mesh["tp"], plan)
    if job.fault == "slow" and rank == job.slow_rank:
        for mlp in model.mlps:
            mlp.register_forward_pre_hook(functools.partial(_slower, mlp, round(job.amount)))
    dp_group = mesh["dp"].get_group()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    replica = rank // job.tp
    gen = torch.Generator().manual_seed(job.seed + replica)

    def step() -> None:
        x, y = _batch(job, rank, gen, job.rows)
        opt.zero_grad(set_to_none=True)
        loss: Any = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        _average(list(model.parameters()), dp_group, job.dp)
        opt.step()

    _train(job, rank, out, step)


def _worker(rank: int, wire: dict[str, Any], port: int, out: str) -> None:
    job = HandJob(**{**wire, "layers": tuple(wire["layers"])})
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.manual_seed(job.seed)
    dist.init_process_group("gloo", rank=rank, world_size=job.world, timeout=datetime.timedelta(seconds=600))
    if job.tp > 1:
        _tensor_parallel(job, rank, out)
    elif job.pp > 1:
        _pipeline(job, rank, out)
    else:
        _data_parallel(job, rank, out)
    dist.barrier()
    dist.destroy_process_group()


def run_job(job: HandJob, out: Path, timeout_s: float = 900.0) -> Path:
    """Run `job` (its processes in a child interpreter) and leave its traces and truth.json in `out`."""
    return run_spawned("stepscope_testing.handwritten_jobs", job, out, timeout_s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run one handwritten job (module docstring)")
    p.add_argument("--run", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("out", nargs="?")
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--dp", type=int, default=4)
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--amount", type=float, default=0.0)
    p.add_argument("--layers", type=int, nargs="+", default=[3, 3])
    p.add_argument("--rows", type=int, default=HandJob.rows, help="rows per step (per microbatch in a pipeline)")
    p.add_argument("--width", type=int, default=WIDTH)
    p.add_argument("--steps", type=int, default=HandJob.steps, help="steps recorded")
    p.add_argument("--tp", type=int, default=HandJob.tp, help="tensor-parallel ranks per replica (pp 1)")
    p.add_argument("--schedule", choices=SCHEDULES, default=HandJob.schedule, help="pipelines' schedule")
    p.add_argument("--calibrate", type=int, default=0, help="cycles of steps that measure the fault's cost")
    a = p.parse_args(argv)
    if a.run:
        wire = json.loads(Path(a.run[0]).read_text())
        spawn_workers(_worker, wire["pp"] * wire["dp"] * wire.get("tp", 1), wire, Path(a.run[1]))
        return 0
    if not a.out:
        p.error("OUT is required")
    job = HandJob(
        Path(a.out).name,
        a.pp,
        a.dp,
        a.fault,
        a.slow_rank,
        a.amount,
        tuple(a.layers),
        a.steps,
        rows=a.rows,
        width=a.width,
        schedule=a.schedule,
        tp=a.tp,
        calibrate=a.calibrate,
    )
    run_job(job, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
