"""Real pipeline-parallel trainings on CPU (torch.distributed.pipelining over gloo), recorded with torch.profiler, with
planted faults and their truth.

One `PipeJob` is one real job of `pp` x `dp` processes (torch.multiprocessing spawn): rank = stage * dp + replica (the
order Megatron and torchtitan give ranks when tensor parallelism is 1). Each stage holds `layers` blocks of a small
MLP over sequences ([batch, tokens, width]); each replica runs the stages' `PipelineStage`s under `Schedule1F1B` with
`microbatches` microbatches per step, and the replicas of a stage average their gradients with one all_reduce over
their data-parallel group before the optimizer step. The process groups are named as a framework names them
(`names`): "titan" (a DeviceMesh with dims pp, dp: `mesh_pp`, `mesh_dp`), "megatron" (PIPELINE_MODEL_PARALLEL_GROUP,
DATA_PARALLEL_GROUP) or "none" (plain `new_group`s, as DeepSpeed's pipeline engine leaves them: who meets whom is
all the traces say). Traces are written the way users record jobs (`tensorboard_trace_handler`).

Faults (`fault`, sized by `amount`):
- `none`: a healthy job;
- `slow_worker`: rank `slow_rank`'s blocks run over `amount` copies of their tokens and average them (the same
  weights, inputs and outputs): each of its calls takes about `amount` times as long, as on a slower device;
- `heavy_stage`: the last stage holds `amount` times the other stages' blocks (layers badly split);
- `seqlen`: every microbatch draws its tokens from 8..`tokens` (unpacked sequences, no length bucketing): no worker
  is consistently slow, every stage's work varies from microbatch to microbatch.
`truth()` says what a correct diagnosis names. Run as a script: `python -m stepscope_testing.pipeline_jobs OUT ...`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope_testing.spawned_jobs import run_spawned, spawn_workers

FAULTS = ("none", "slow_worker", "heavy_stage", "seqlen")
NAMES = ("titan", "megatron", "none")
WIDTH = 128
MIN_TOKENS = 8
BUBBLE_SHARE = 1 / 3
"""a 1F1B schedule whose warm-up and cool-down take at least this share of the step ((pp-1)/(microbatches+pp-1))
has a bubble worth a finding"""


@dataclass(frozen=True)
class PipeJob:
    name: str
    pp: int
    dp: int
    fault: str = "none"
    slow_rank: int = -1
    amount: float = 0.0
    steps: int = 6
    microbatches: int = 4
    layers: int = 2
    batch: int = 16
    tokens: int = 96
    names: str = "titan"
    seed: int = 0

    @property
    def world(self) -> int:
        return self.pp * self.dp

    def truth(self) -> dict[str, Any]:
        """What a correct diagnosis says: slow ranks and their cause, the job's pipeline findings and its layout."""
        layout = {"stages": self.pp, "replicas": self.dp}
        findings = {"heavy_stage": ["stage_imbalance"], "seqlen": ["data_imbalance"]}.get(self.fault, [])
        if (self.pp - 1) / (self.microbatches + self.pp - 1) >= BUBBLE_SHARE:
            findings.append("pipeline_bubble")
        slow = [{"rank": self.slow_rank, "cause": "compute"}] if self.fault == "slow_worker" else []
        kind = "balanced" if self.fault == "none" else self.fault
        return {"slow_ranks": slow, "kind": kind, "findings": sorted(findings), "layout": layout}

    def wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _stage_layers(job: PipeJob, stage: int) -> int:
    if job.fault == "heavy_stage" and stage == job.pp - 1:
        return max(1, round(job.layers * job.amount))
    return job.layers


def _make_stage(job: PipeJob, rank: int, stage: int) -> Any:
    import torch
    from torch import nn

    copies = max(1, round(job.amount)) if job.fault == "slow_worker" and rank == job.slow_rank else 1
    blocks = _stage_layers(job, stage)
    last = stage == job.pp - 1

    class Stage(nn.Module):
        """Blocks over each sequence's first `length` tokens (the length rides in the last channel)."""

        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(
                nn.Sequential(nn.Linear(WIDTH - 1, 4 * WIDTH), nn.ReLU(), nn.Linear(4 * WIDTH, WIDTH - 1))
                for _ in range(blocks)
            )
            self.head = nn.Linear(WIDTH - 1, 10) if last else None

        def forward(self, x: Any) -> Any:
            # the stage's shape inference runs this on an uninitialised tensor (NaN or anything): every length gives
            # the same output shape, so an unreadable one takes the whole sequence
            raw = float(x[0, 0, -1].item())
            length = min(max(int(raw), 1), x.shape[1]) if math.isfinite(raw) else x.shape[1]
            h = x[:, :length, :-1]
            for block in self.blocks:
                if copies > 1:
                    out = block(torch.cat([h] * copies, dim=1))
                    h = h + out.reshape(h.shape[0], copies, h.shape[1], h.shape[2]).mean(dim=1)
                else:
                    h = h + block(h)
            if self.head is not None:
                return self.head(h.mean(dim=1))
            rest = x[:, length:, :-1]
            return torch.cat([torch.cat([h, rest], dim=1), x[:, :, -1:]], dim=2)

    return Stage()


def _groups(job: PipeJob, rank: int) -> tuple[Any, Any]:
    """(this rank's pipeline group, its data-parallel group), named as `job.names` says."""
    import torch.distributed as dist

    if job.names == "titan":
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (job.pp, job.dp), mesh_dim_names=("pp", "dp"))
        return mesh.get_group("pp"), mesh.get_group("dp")
    desc = {"megatron": ("PIPELINE_MODEL_PARALLEL_GROUP", "DATA_PARALLEL_GROUP")}.get(job.names)
    pp_group = dp_group = None
    for replica in range(job.dp):
        ranks = [s * job.dp + replica for s in range(job.pp)]
        g = dist.new_group(ranks, group_desc=desc[0]) if desc else dist.new_group(ranks)
        pp_group = g if rank in ranks else pp_group
    for stage in range(job.pp):
        ranks = [stage * job.dp + r for r in range(job.dp)]
        g = dist.new_group(ranks, group_desc=desc[1]) if desc else dist.new_group(ranks)
        dp_group = g if rank in ranks else dp_group
    return pp_group, dp_group


def _inputs(job: PipeJob, replica: int, step: int) -> Any:
    """One step's batch: [batch, tokens, width] with each microbatch's length in the last channel."""
    import torch

    x = torch.randn(job.batch, job.tokens, WIDTH)
    per = job.batch // job.microbatches
    draw = random.Random(job.seed * 100_003 + replica * 1009 + step)  # noqa: S311 - a seeded workload
    for m in range(job.microbatches):
        length = draw.randint(MIN_TOKENS, job.tokens) if job.fault == "seqlen" else job.tokens * 3 // 4
        x[m * per : (m + 1) * per, :, -1] = float(length)
    return x


def _worker(rank: int, wire: dict[str, Any], port: int, out: str) -> None:
    job = PipeJob(**wire)
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank)})
    os.environ["WORLD_SIZE"] = str(job.world)
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    torch.set_num_threads(1)
    torch.manual_seed(job.seed)
    dist.init_process_group("gloo", rank=rank, world_size=job.world, timeout=datetime.timedelta(seconds=600))
    stage, replica = divmod(rank, job.dp)
    pp_group, dp_group = _groups(job, rank)
    module = _make_stage(job, rank, stage)
    pipe = PipelineStage(module, stage, job.pp, torch.device("cpu"), group=pp_group)
    loss_fn = torch.nn.CrossEntropyLoss()
    schedule = Schedule1F1B(pipe, job.microbatches, loss_fn=loss_fn)
    opt = torch.optim.SGD(module.parameters(), lr=0.001)
    labels = torch.randint(0, 10, (job.batch,))
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=job.steps, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(out, use_gzip=True),
    )
    with prof:
        for step in range(job.steps + 3):
            opt.zero_grad()
            x = _inputs(job, replica, step)
            if stage == 0:
                schedule.step(x)
            elif stage == job.pp - 1:
                schedule.step(target=labels)
            else:
                schedule.step()
            grads = [p.grad for p in module.parameters() if p.grad is not None]
            if grads and job.dp > 1:
                flat = torch.cat([g.reshape(-1) for g in grads])
                dist.all_reduce(flat, group=dp_group)
                flat /= job.dp
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def run_job(job: PipeJob, out: Path, timeout_s: float = 900.0, quiet: tuple[float, float] | None = None) -> Path:
    """Run `job` (its processes in a child interpreter) and leave its traces and truth.json in `out`."""
    return run_spawned("stepscope_testing.pipeline_jobs", job, out, timeout_s, quiet)


def _spawn(spec: Path, out: Path) -> None:
    wire = json.loads(spec.read_text())
    spawn_workers(_worker, PipeJob(**wire).world, wire, out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run one real pipeline-parallel job of the scenario corpus")
    p.add_argument("--run", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("out", nargs="?")
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--amount", type=float, default=0.0)
    p.add_argument("--names", choices=NAMES, default="titan")
    p.add_argument("--steps", type=int, default=6)
    a = p.parse_args(argv)
    if a.run:
        _spawn(Path(a.run[0]), Path(a.run[1]))
        return 0
    if not a.out:
        p.error("OUT is required")
    job = PipeJob(Path(a.out).name, a.pp, a.dp, a.fault, a.slow_rank, a.amount, a.steps, names=a.names)
    run_job(job, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
