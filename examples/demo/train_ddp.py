"""A tiny 4-rank DDP training on CPU (gloo) with one rank planted slow. It knows nothing about stepscope: the hook
arrives through the environment only (PYTHONPATH + STEPSCOPE_HOOK_DIR set by the pod spec).

Rank: JOB_COMPLETION_INDEX (Indexed Job) or RANK. World size: WORLD_SIZE (default 4).
Slow rank: SLOW_RANK=<rank>, SLOW_MODE=host (sleeps while loading data), python (plain Python work before loading
data, outside any record_function), host+python (both) or compute (extra matmuls), SLOW_MS;
SLOW_AFTER_STEPS=<n>: balanced for n steps first, then that rank slows down (the trigger demo); SLOW_FOR_STEPS=<m>:
slow for m steps, balanced for m steps, and so on (separate slowdowns).
SLOW_MODE=hang: that rank stops for good in its data loading after HANG_AFTER_STEPS steps (default 100); the
others then wait in their next all-reduce.
SLOW_MODE=desync: every rank all-reduces 4 metrics after its optimizer step; after HANG_AFTER_STEPS steps that rank
broadcasts 1024 values instead (a code path only it takes), and the job stands still.
Every rank (the regression gate's examples): INPUT_MS waits that long for each batch (an I/O-bound input pipeline,
default 0); ADDED_MS runs that much extra compute per step in a record_function "added_work" (a code change that
slows every rank alike, default 0).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def _rank() -> int:
    for name in ("JOB_COMPLETION_INDEX", "RANK"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def wait_forever() -> None:
    while True:
        time.sleep(3600)  # a stuck input pipeline


INPUT_MS = float(os.environ.get("INPUT_MS", "0"))
ADDED_MS = float(os.environ.get("ADDED_MS", "0"))


def load_batch(rank: int, slow: bool, mode: str, slow_ms: float) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.profiler.record_function("load_batch"):
        x = torch.randn(64, 256)
        y = torch.randint(0, 10, (64,))
        if INPUT_MS:
            time.sleep(INPUT_MS / 1000.0)
        if slow and "host" in mode.split("+"):
            time.sleep(slow_ms / 1000.0)  # a slow input pipeline on this rank's host
        return x, y


def parse_records(slow_ms: float) -> int:
    """Plain Python work (no torch, no record_function): a slow rank's record parsing."""
    end = time.perf_counter() + slow_ms / 1000.0
    total = 0
    while time.perf_counter() < end:
        total += sum(len(str(i)) for i in range(200))
    return total


def sync_metrics(loss: torch.Tensor, desync: bool) -> None:
    """The metrics every rank logs, averaged over the ranks; a desynchronised rank takes another collective."""
    metrics = torch.stack([loss.detach(), loss.detach() ** 2, torch.tensor(64.0), torch.tensor(1.0)])
    if desync:
        dist.broadcast(torch.zeros(1024), src=0)
    else:
        dist.all_reduce(metrics)


def extra_compute(slow_ms: float, region: str = "extra_compute") -> None:
    with torch.profiler.record_function(region):
        a = torch.randn(256, 256)
        end = time.perf_counter() + slow_ms / 1000.0
        while time.perf_counter() < end:
            a = torch.tanh(a @ a)  # a slower device on this rank: more compute per step


def slowed(step: int, after: int, period: int) -> bool:
    """Whether the slow rank is slow at `step`: from step `after` on, for `period` steps out of every 2 x `period`
    (always, when `period` is 0)."""
    return step >= after and (period <= 0 or (step - after) // period % 2 == 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "0")), help="0: until killed")
    parser.add_argument("--log-every", type=int, default=50)
    args = parser.parse_args(argv)

    rank = _rank()
    world = int(os.environ.get("WORLD_SIZE", "4"))
    os.environ["RANK"] = str(rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    slow_rank = int(os.environ.get("SLOW_RANK", "-1"))
    mode = os.environ.get("SLOW_MODE", "host")
    slow_ms = float(os.environ.get("SLOW_MS", "60"))
    slow_after = int(os.environ.get("SLOW_AFTER_STEPS", "0"))
    slow_for = int(os.environ.get("SLOW_FOR_STEPS", "0"))
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=dt.timedelta(seconds=120))
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    print(f"rank {rank}/{world} started (slow={rank == slow_rank} mode={mode} {slow_ms} ms)", flush=True)
    step = 0
    started = time.perf_counter()
    hang_after = int(os.environ.get("HANG_AFTER_STEPS", "100"))
    while args.steps == 0 or step < args.steps:
        slow = rank == slow_rank and slowed(step, slow_after, slow_for)
        if rank == slow_rank and step > 0 and slow != slowed(step - 1, slow_after, slow_for):
            what = "slows down" if slow else "is back to normal"
            print(f"rank {rank} {what} at step {step} ({mode}, {slow_ms:g} ms per step)", flush=True)
        if slow and mode == "hang" and step >= hang_after:
            print(f"rank {rank} hangs at step {step}", flush=True)
            wait_forever()
        desync = slow and mode == "desync" and step >= hang_after
        if desync:
            print(f"rank {rank} desyncs at step {step}: broadcast where the others all_reduce", flush=True)
        if slow and "python" in mode.split("+"):
            parse_records(slow_ms)
        x, y = load_batch(rank, slow, mode, slow_ms)
        with torch.profiler.record_function("forward_backward"):
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
        if slow and mode == "compute":
            extra_compute(slow_ms)
        if ADDED_MS:
            extra_compute(ADDED_MS, "added_work")
        optimizer.step()
        if mode == "desync":
            sync_metrics(loss, desync)
        step += 1
        if step % args.log_every == 0:
            elapsed = time.perf_counter() - started
            print(
                f"rank {rank} step {step} loss {loss.item():.3f} {1000 * elapsed / args.log_every:.1f} ms/step",
                flush=True,
            )
            started = time.perf_counter()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
