"""Real FSDP2 data-parallel trainings on CPU (`torch.distributed.fsdp.fully_shard` over gloo), recorded with
torch.profiler, with a planted slow worker and their truth.

One `FsdpJob` is one real job of `world` processes (torch.multiprocessing spawn) over a DeviceMesh of one
dimension ("dp_shard"): a small MLP over sequences whose every block, and the root, is `fully_shard`ed, so each
block's forward and backward all-gathers its parameters and the backward reduce-scatters its gradients. Traces are
written the way users record jobs (`tensorboard_trace_handler`). Faults: `none` (healthy), `slow_worker` (rank
`slow_rank`'s blocks run over `amount` copies of their tokens and average them: the same weights, inputs and
outputs, each call about `amount` times as long, as on a slower device) or `slow_host` (rank `slow_rank` prepares
its batch in plain Python before the forward, `amount` ms of CPU time per step, outside any torch op: a host-side
input cost). Run as a script:
`python -m stepscope_testing.fsdp_jobs OUT ...`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope_testing.spawned_jobs import run_spawned, spawn_workers

FAULTS = ("none", "slow_worker", "slow_host")
WIDTH = 128


@dataclass(frozen=True)
class FsdpJob:
    name: str
    world: int = 4
    fault: str = "none"
    slow_rank: int = -1
    amount: float = 0.0
    steps: int = 6
    layers: int = 4
    batch: int = 8
    tokens: int = 64
    seed: int = 0
    tp: int = 1
    """tensor-parallel ranks: a 2D mesh ("dp_shard", "tp"), each block's products ColwiseParallel and RowwiseParallel
    over "tp" before fully_shard over "dp_shard" (the slow_worker fault's wider products cannot run under it)"""

    def truth(self) -> dict[str, Any]:
        cause = {"slow_worker": "compute", "slow_host": "host"}.get(self.fault)
        slow = [{"rank": self.slow_rank, "cause": cause}] if cause else []
        out: dict[str, Any] = {"slow_ranks": slow, "kind": "balanced" if self.fault == "none" else self.fault}
        if self.tp > 1:
            findings = ["tp_straggler"] if cause == "compute" else []
            out |= {"findings": findings, "layout": {"stages": 1, "replicas": self.world // self.tp, "tp": self.tp}}
        return out

    def wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _model(job: FsdpJob, rank: int) -> Any:
    import torch
    from torch import nn

    copies = max(1, round(job.amount)) if job.fault == "slow_worker" and rank == job.slow_rank else 1

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.ReLU(), nn.Linear(4 * WIDTH, WIDTH))

        def forward(self, h: Any) -> Any:
            if copies == 1:
                return h + self.mlp(h)
            out = self.mlp(torch.cat([h] * copies, dim=1))
            return h + out.reshape(h.shape[0], copies, h.shape[1], h.shape[2]).mean(dim=1)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(job.layers))
            self.head = nn.Linear(WIDTH, 10)

        def forward(self, x: Any) -> Any:
            for block in self.blocks:
                x = block(x)
            return self.head(x.mean(dim=1))

    return Model()


def _prepare_in_python(cpu_ms: float, seed: int) -> int:
    """Token ids built from text in plain Python until `cpu_ms` of this thread's CPU time is spent: a fixed amount of
    host work, however long waiting for a CPU stretches it."""
    import time

    end = time.thread_time() + cpu_ms / 1000
    words = [f"w{(seed * 31 + i) % 997}" for i in range(64)]
    ids = 0
    while time.thread_time() < end:
        for word in words:
            ids = (ids * 131 + sum(ord(c) for c in word.upper())) % 1_000_003
    return ids


def _worker(rank: int, wire: dict[str, Any], port: int, out: str) -> None:
    job = FsdpJob(**wire)
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank)})
    os.environ["WORLD_SIZE"] = str(job.world)
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)
    torch.manual_seed(job.seed)
    dist.init_process_group("gloo", rank=rank, world_size=job.world, timeout=datetime.timedelta(seconds=600))
    if job.tp > 1:
        mesh2d = init_device_mesh("cpu", (job.world // job.tp, job.tp), mesh_dim_names=("dp_shard", "tp"))
        mesh, tp_mesh = mesh2d["dp_shard"], mesh2d["tp"]
    else:
        mesh, tp_mesh = init_device_mesh("cpu", (job.world,), mesh_dim_names=("dp_shard",)), None
    model = _model(job, rank)
    for block in model.blocks:
        if tp_mesh is not None:
            from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

            parallelize_module(block, tp_mesh, {"mlp.0": ColwiseParallel(), "mlp.2": RowwiseParallel()})
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    loss_fn = torch.nn.CrossEntropyLoss()
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=job.steps, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(out, use_gzip=True),
    )
    with prof:
        for _ in range(job.steps + 3):
            opt.zero_grad()
            if job.fault == "slow_host" and rank == job.slow_rank:
                _prepare_in_python(job.amount, job.seed)
            x = torch.randn(job.batch, job.tokens, WIDTH)
            loss = loss_fn(model(x), torch.randint(0, 10, (job.batch,)))
            loss.backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def run_job(job: FsdpJob, out: Path, timeout_s: float = 900.0, quiet: tuple[float, float] | None = None) -> Path:
    """Run `job` (its processes in a child interpreter) and leave its traces and truth.json in `out`."""
    return run_spawned("stepscope_testing.fsdp_jobs", job, out, timeout_s, quiet)


def _spawn(spec: Path, out: Path) -> None:
    wire = json.loads(spec.read_text())
    spawn_workers(_worker, FsdpJob(**wire).world, wire, out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run one real FSDP2 job of the scenario corpus")
    p.add_argument("--run", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("out", nargs="?")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--amount", type=float, default=0.0)
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (a 2D mesh with dp_shard)")
    a = p.parse_args(argv)
    if a.run:
        _spawn(Path(a.run[0]), Path(a.run[1]))
        return 0
    if not a.out:
        p.error("OUT is required")
    if a.tp > 1 and a.fault == "slow_worker":
        p.error("the slow_worker fault widens the products, which tensor parallelism cannot run")
    run_job(FsdpJob(Path(a.out).name, a.world, a.fault, a.slow_rank, a.amount, tp=a.tp), Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
