"""A real torch.distributed (gloo, CPU) DDP training under torch.profiler: the workload of the regression-gate
tests and of bench/gate_accuracy.py.

    python gate_job.py run OUT [--world 2] [--steps 12] [--added-work N]
    python gate_job.py group OUT:N [OUT:N ...] [--together] [--world 2] [--steps 12]

`run` writes one stepscope session folder: OUT/ranks/<rank>/{trace.pt.trace.json.gz, manifest.json}.
--added-work N: every rank runs N extra 256x256 matmul+tanh rounds per step inside a record_function "added_work"
region: a code change that makes each step slower in the same way on every rank (0: the baseline).
`group` records several runs (OUT:N = a folder and its added work): one after the other, or with --together all at
once (duet benchmarking, Bulej et al. 2020): the jobs start their recorded steps together and each keeps training
until every other one's recording is done, so a load that other users put on the machine in the meantime slows
every run alike instead of only one.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

WARMUP_STEPS = 2
BATCH = 512
MAX_TAIL_STEPS = 5000
WAIT_S = 300.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _added_work(rounds: int, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.profiler.record_function("added_work"):
        for _ in range(rounds):
            a = torch.tanh(a @ w)
    return a


class Trainer:
    def __init__(self, rank: int, added: int) -> None:
        torch.manual_seed(rank)
        self.model = DistributedDataParallel(
            nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        )
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.loss_fn = nn.CrossEntropyLoss()
        self.x = torch.randn(BATCH, 256)
        self.y = torch.randint(0, 10, (BATCH,))
        self.a = torch.randn(256, 256)
        self.w = torch.randn(256, 256) / 16
        self.added = added

    def step(self) -> None:
        loss = self.loss_fn(self.model(self.x), self.y)
        self.opt.zero_grad()
        loss.backward()
        if self.added:
            self.a = _added_work(self.added, self.a, self.w)
        self.opt.step()


def _group_store(address: str) -> dist.TCPStore:
    host, _, port = address.rpartition(":")
    return dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=WAIT_S))


def _keep_training(trainer: Trainer, store: dist.TCPStore, jobs: int) -> None:
    """Train on (not recorded) until every job's recording is done; the ranks agree when to stop."""
    for _ in range(MAX_TAIL_STEPS):
        flag = torch.tensor([1 if store.add("done", 0) >= jobs else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if int(flag.item()):
            return
        trainer.step()


def _worker(rank: int, world: int, port: int, out: str, steps: int, added: int, group: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    trainer = Trainer(rank, added)
    rank_dir = Path(out) / "ranks" / str(rank)
    rank_dir.mkdir(parents=True, exist_ok=True)
    raw = rank_dir / "trace.pt.trace.json"
    store = _group_store(group.split("/", maxsplit=1)[0]) if group else None
    if store is not None:  # together: every job records from the same moment, with the profiler and the model warm
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            trainer.step()
        for _ in range(WARMUP_STEPS):
            trainer.step()
        dist.barrier()
        store.add("ready", 1)
        store.wait(["go"])
    sched = torch.profiler.schedule(wait=0, warmup=WARMUP_STEPS, active=steps, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=sched,
        on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
    ) as prof:
        for _ in range(steps + WARMUP_STEPS):
            trainer.step()
            prof.step()
    if store is not None:
        dist.barrier()
        if rank == 0:
            store.add("done", 1)
        _keep_training(trainer, store, int(group.split("/")[1]))
    dist.barrier()
    dist.destroy_process_group()
    _finish(rank_dir, raw, rank, world)


def _finish(rank_dir: Path, raw: Path, rank: int, world: int) -> None:
    gz = rank_dir / "trace.pt.trace.json.gz"
    with raw.open("rb") as fin, gzip.open(gz, "wb", compresslevel=5) as fout:
        shutil.copyfileobj(fin, fout)
    raw.unlink()
    data = gz.read_bytes()
    manifest = {
        "schemaVersion": 1,
        "captureId": "cap-gate",
        "namespace": "default",
        "session": "gate",
        "pod": f"trainer-{rank}",
        "node": "node-0",
        "rank": rank,
        "state": "uploaded",
        "files": [{"name": gz.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}],
        "meta": {"captureId": "cap-gate", "rank": rank, "worldSize": world, "pid": os.getpid(), "node": "node-0"},
    }
    (rank_dir / "manifest.json").write_text(json.dumps(manifest))


def run(out: str, *, world: int, steps: int, added: int, group: str = "") -> None:
    """group: "host:port/jobs" of the launcher's store when several jobs record together."""
    mp.start_processes(
        _worker, args=(world, _free_port(), out, steps, added, group), nprocs=world, start_method="spawn"
    )


def _spec(text: str) -> tuple[Path, int]:
    path, _, added = text.rpartition(":")
    return Path(path), int(added)


def group(specs: list[tuple[Path, int]], *, world: int, steps: int, together: bool) -> None:
    if not together:
        for out, added in specs:
            run(str(out), world=world, steps=steps, added=added)
        return
    port = _free_port()
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=WAIT_S))
    procs = []
    for out, added in specs:
        cmd = [sys.executable, __file__, "run", str(out), "--world", str(world), "--steps", str(steps)]
        procs.append(subprocess.Popen([*cmd, "--added-work", str(added), "--group", f"127.0.0.1:{port}/{len(specs)}"]))
    try:
        deadline = time.monotonic() + WAIT_S
        while store.add("ready", 0) < len(specs) * world:
            if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in procs):
                raise RuntimeError("the jobs did not all get ready")
            time.sleep(0.01)
        store.set("go", "1")  # every rank waits on this key: they start at once
        codes = [p.wait(WAIT_S) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(codes):
        raise RuntimeError(f"a job failed: exit codes {codes}")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--group", default="", help="host:port/jobs of the launcher's store (together), internal")
    q = sub.add_parser("group")
    q.add_argument("specs", nargs="+", type=_spec, help="OUT:N, a folder and its added work")
    q.add_argument("--together", action="store_true")
    r.add_argument("--added-work", type=int, default=0, help="extra matmul+tanh rounds per step on every rank")
    for s in (r, q):
        s.add_argument("--world", type=int, default=2)
        s.add_argument("--steps", type=int, default=12)
    a = p.parse_args()
    if a.what == "run":
        run(a.out, world=a.world, steps=a.steps, added=a.added_work, group=a.group)
    else:
        group(a.specs, world=a.world, steps=a.steps, together=a.together)


if __name__ == "__main__":
    main()
