"""A real torch.distributed (gloo, CPU) DDP training under torch.profiler: the workload of the regression-gate
tests and of bench/gate_accuracy.py.

    python gate_job.py OUT:N [OUT:N ...] [--separate] [--world 2] [--steps 12]

Each OUT:N is one recording, written as a stepscope session folder (OUT/traces/rank<R>.pt.trace.json.gz and
OUT/traces/rank<R>/manifest.json); N is its added work: every rank runs N extra 256x256 matmul+tanh rounds per step
inside a record_function "added_work" region, a change that makes each step slower in the same way on every rank (0: the
baseline). By default one training job makes the recordings one after the other (like sessions taken a second
apart on one long-running job), so a load other users put on a shared machine changes little between them;
--separate starts a new job for each recording, one after the other, as a pipeline compares today's run with a
baseline recorded earlier. --quiet-busy B: first wait (up to --quiet-wait s) until the machine's CPUs are less
than B busy, since what other users run meanwhile moves wall-clock step times.
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
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from stepscope_local.ports import free_port as _free_port

WARMUP_STEPS = 2
SETTLE_S = float(os.environ.get("GATE_SETTLE_S", "3"))
"""unrecorded training (and one profiled step) before the first recording: CPU clocks, caches, allocator warm"""
BATCH = 512

Recording = tuple[str, int]  # (folder, added work)


def cpu_busy(seconds: float = 2.0) -> float:
    """Share of all CPUs' time spent busy over `seconds` (from /proc/stat), 0..1."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0)

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1.0 - (idle1 - idle0) / max(total1 - total0, 1)


def wait_for_quiet(limit: float, wait_s: float) -> float:
    """Wait until the CPUs are less than `limit` busy, at most `wait_s`; the last busy share seen."""
    deadline = time.monotonic() + wait_s
    busy = cpu_busy()
    while busy > limit and time.monotonic() < deadline:
        busy = cpu_busy()
    return busy


def _added_work(rounds: int, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.profiler.record_function("added_work"):
        for _ in range(rounds):
            a = torch.tanh(a @ w)
    return a


class Trainer:
    def __init__(self, rank: int) -> None:
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

    def step(self, added: int) -> None:
        loss = self.loss_fn(self.model(self.x), self.y)
        self.opt.zero_grad()
        loss.backward()
        if added:
            self.a = _added_work(added, self.a, self.w)
        self.opt.step()


def _record(trainer: Trainer, raw: Path, steps: int, added: int) -> None:
    sched = torch.profiler.schedule(wait=0, warmup=WARMUP_STEPS, active=steps, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=sched,
        on_trace_ready=lambda p: p.export_chrome_trace(str(raw)),
    ) as prof:
        for _ in range(steps + WARMUP_STEPS):
            trainer.step(added)
            prof.step()


def _worker(rank: int, world: int, port: int, recordings: list[Recording], steps: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    trainer = Trainer(rank)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        trainer.step(0)
    settle = torch.tensor([0])
    started = time.monotonic()
    while not settle.item():  # the ranks agree when to stop
        trainer.step(0)
        settle = torch.tensor([int(time.monotonic() - started > SETTLE_S)])
        dist.all_reduce(settle, op=dist.ReduceOp.MAX)
    raws = []
    for out, added in recordings:
        traces = Path(out) / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        raws.append(traces / f"rank{rank}.pt.trace.json")
        _record(trainer, raws[-1], steps, added)
        dist.barrier()
    dist.destroy_process_group()
    for raw in raws:
        _finish(raw, rank, world, steps)


def _finish(raw: Path, rank: int, world: int, steps: int) -> None:
    gz = raw.with_name(f"rank{rank}.pt.trace.json.gz")
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
        "files": [{"name": "trace.pt.trace.json.gz", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}],
        "meta": {
            "captureId": "cap-gate",
            "rank": rank,
            "worldSize": world,
            "pid": os.getpid(),
            "node": "node-0",
            "stepsRequested": steps,
            "stepsCaptured": steps,
        },
    }
    rank_dir = raw.parent / f"rank{rank}"
    rank_dir.mkdir(exist_ok=True)
    (rank_dir / "manifest.json").write_text(json.dumps(manifest))


def run(recordings: list[Recording], *, world: int = 2, steps: int = 12, separate: bool = False) -> None:
    groups = [[r] for r in recordings] if separate else [recordings]
    for group in groups:
        mp.start_processes(_worker, args=(world, _free_port(), group, steps), nprocs=world, start_method="spawn")


def _recording(text: str) -> Recording:
    out, _, added = text.rpartition(":")
    if not out:
        raise argparse.ArgumentTypeError(f"'{text}' is not OUT:N")
    return out, int(added)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recordings", nargs="+", type=_recording, help="OUT:N, a session folder and its added work")
    p.add_argument("--separate", action="store_true", help="one job per recording, one after the other")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--quiet-busy", type=float, default=None, help="first wait until the CPUs are less busy than this")
    p.add_argument("--quiet-wait", type=float, default=300.0)
    a = p.parse_args()
    if a.quiet_busy is not None:
        print(f"cpus busy {wait_for_quiet(a.quiet_busy, a.quiet_wait):.2f}", flush=True)
    run(a.recordings, world=a.world, steps=a.steps, separate=a.separate)


if __name__ == "__main__":
    main()
