"""A real 4-process torch.distributed (gloo) training under torch.profiler, with one planted slow rank.

Usage: python gloo_job.py OUT_DIR --slow-rank R --cause host|compute [--world 4] [--steps 5]
Writes a stepscope session folder: OUT_DIR/ranks/<rank>/{trace.pt.trace.json.gz, manifest.json}.
host: the slow rank sleeps before each step's forward pass (a stalled input pipeline);
compute: it runs extra matrix multiplications in each step's forward pass.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from stepscope_local.ports import free_port as _free_port

HOST_STALL_S = 0.06
EXTRA_MATMULS = 12


def _worker(rank: int, world: int, port: int, out: str, slow_rank: int, cause: str, steps: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(64, 256)
    extra = torch.randn(384, 384)
    rank_dir = Path(out) / "ranks" / str(rank)
    rank_dir.mkdir(parents=True, exist_ok=True)
    raw = rank_dir / "trace.pt.trace.json"
    sched = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    durations: list[float] = []
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=sched,
        on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
    ) as prof:
        for _ in range(steps + 1):
            t0 = time.perf_counter()
            if rank == slow_rank and cause == "host":
                time.sleep(HOST_STALL_S)
            if rank == slow_rank and cause == "loader":  # as a DataLoader shows up: inside a record_function
                with torch.profiler.record_function("load_batch"):
                    time.sleep(HOST_STALL_S)
            out_t = model(data)
            if rank == slow_rank and cause == "compute":
                acc = extra
                for _ in range(EXTRA_MATMULS):
                    acc = torch.tanh(acc @ extra)
                out_t = out_t + acc.mean()
            loss = out_t.square().mean()
            opt.zero_grad()
            loss.backward()
            for p in model.parameters():
                assert p.grad is not None
                dist.all_reduce(p.grad)
            opt.step()
            prof.step()
            durations.append((time.perf_counter() - t0) * 1000)
    dist.barrier()
    dist.destroy_process_group()
    gz = rank_dir / "trace.pt.trace.json.gz"
    with raw.open("rb") as fin, gzip.open(gz, "wb", compresslevel=5) as fout:
        shutil.copyfileobj(fin, fout)
    raw.unlink()
    data_bytes = gz.read_bytes()
    manifest = {
        "schemaVersion": 1,
        "captureId": "cap-test",
        "namespace": "default",
        "session": "gloo",
        "pod": f"trainer-{rank}",
        "node": f"node-{rank // 2}",
        "rank": rank,
        "state": "uploaded",
        "files": [{"name": gz.name, "size": len(data_bytes), "sha256": hashlib.sha256(data_bytes).hexdigest()}],
        "meta": {
            "captureId": "cap-test",
            "rank": rank,
            "worldSize": world,
            "pid": os.getpid(),
            "node": f"node-{rank // 2}",
            "pod": f"trainer-{rank}",
            "stepsRequested": steps,
            "stepsCaptured": steps,
            "stepDurationsMs": durations[1:],
        },
    }
    (rank_dir / "manifest.json").write_text(json.dumps(manifest))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--cause", choices=["host", "loader", "compute"], default="host")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--steps", type=int, default=5)
    a = p.parse_args()
    mp.start_processes(
        _worker,
        args=(a.world, _free_port(), a.out, a.slow_rank, a.cause, a.steps),
        nprocs=a.world,
        start_method="spawn",
    )


if __name__ == "__main__":
    main()
