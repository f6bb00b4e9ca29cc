"""A loop without a torch optimizer: it marks step boundaries with stepscope_hook.step().

Controls in $TRAIN_CONTROL_DIR: `stop` ends the loop; the step count is written to `steps`."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

import stepscope_hook


def main() -> None:
    control = Path(os.environ["TRAIN_CONTROL_DIR"])
    w = torch.randn(32, 32, requires_grad=True)
    deadline = time.monotonic() + float(os.environ.get("TRAIN_MAX_SECONDS", "120"))
    step = 0
    while time.monotonic() < deadline and not (control / "stop").exists():
        loss = (torch.randn(16, 32) @ w).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.001 * w.grad
            w.grad = None
        stepscope_hook.step()
        step += 1
        (control / "steps").write_text(str(step))
        time.sleep(0.02)


if __name__ == "__main__":
    main()
