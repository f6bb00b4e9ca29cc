"""A tiny 4-rank gloo DDP training for the Flight Recorder tests. It knows nothing of stepscope: the hook arrives only
through PYTHONPATH (sitecustomize) and STEPSCOPE_HOOK_DIR.

Every step: load a batch, forward and backward (DDP's gradient all_reduce), the optimizer's step, then an all_reduce
of 4 metrics. Control files in $TRAIN_CONTROL_DIR: `stop` ends the loop; once `fault` exists, rank $FAULT_RANK
misbehaves at its next step, as $FAULT says:
- stuck:      it never leaves its data loading (stuck_in_data_loader); the others wait in DDP's all_reduce;
- collective: it broadcasts 1024 values where the others all_reduce their 4 metrics;
- sizes:      it all_reduces 8 metrics where the others all_reduce 4;
- die:        its process is killed (SIGKILL) while loading data; the others wait for it in DDP's all_reduce.
The lines the tests look for in the Flight Recorder's call sites carry a `# site:` comment.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def stuck_in_data_loader(control: Path) -> None:
    while not (control / "stop").exists():
        time.sleep(0.1)


def load_batch(control: Path, fault: str) -> torch.Tensor:
    if fault == "stuck":
        stuck_in_data_loader(control)  # site: stuck
    if fault == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return torch.randn(8, 16)


def sync_metrics(loss: torch.Tensor, fault: str) -> None:
    metrics = torch.stack([loss.detach(), loss.detach() * 2, torch.tensor(8.0), torch.tensor(1.0)])
    if fault == "collective":
        dist.broadcast(torch.zeros(1024), src=0)  # site: collective
    elif fault == "sizes":
        dist.all_reduce(torch.zeros(8))  # site: sizes
    else:
        dist.all_reduce(metrics)  # site: metrics


def main() -> None:
    dist.init_process_group("gloo", timeout=dt.timedelta(seconds=300))
    rank = dist.get_rank()
    control = Path(os.environ["TRAIN_CONTROL_DIR"])
    kind = os.environ.get("FAULT", "none")
    fault_rank = int(os.environ.get("FAULT_RANK", "2"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    deadline = time.monotonic() + float(os.environ.get("TRAIN_MAX_SECONDS", "120"))
    step = 0
    while time.monotonic() < deadline and not (control / "stop").exists():
        fault = kind if rank == fault_rank and (control / "fault").exists() else "none"
        x = load_batch(control, fault)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()  # site: backward
        opt.step()
        sync_metrics(loss, fault)
        step += 1
        (control / f"steps-rank-{rank}").write_text(str(step))
        time.sleep(0.02)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
