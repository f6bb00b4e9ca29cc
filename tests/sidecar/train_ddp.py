"""A tiny gloo DDP training for the capture tests. It knows nothing of stepscope: the hook arrives only
through PYTHONPATH (sitecustomize) and STEPSCOPE_HOOK_DIR.

Test controls (plain files in $TRAIN_CONTROL_DIR): `stop` ends the loop; `hang-rank-<r>` makes rank r stop
stepping (it sleeps inside `stuck_in_data_loader`, which the stack dump must show)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def stuck_in_data_loader(control: Path) -> None:
    while not (control / "stop").exists():
        time.sleep(0.1)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    control = Path(os.environ["TRAIN_CONTROL_DIR"])
    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    deadline = time.monotonic() + float(os.environ.get("TRAIN_MAX_SECONDS", "120"))
    step = 0
    while time.monotonic() < deadline and not (control / "stop").exists():
        if (control / f"hang-rank-{rank}").exists():
            stuck_in_data_loader(control)
            break
        opt.zero_grad()
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        step += 1
        (control / f"steps-rank-{rank}").write_text(str(step))
        time.sleep(0.03)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
