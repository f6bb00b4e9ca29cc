"""Running one real multi-process job of the corpus in a child interpreter (the pipeline and FSDP2 jobs): its
processes spawned by torch.multiprocessing, its traces and truth.json left in a folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from stepscope_testing.gloo_jobs import _free_port, wait_for_quiet
from stepscope_testing.planted_cost import planted_cost

CALIBRATION = ".{name}.calibration.json"
"""beside a job's folder: the step times of its calibration (stepscope_testing.planted_cost), from its rank 0"""


class SpawnedJob(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def world(self) -> int: ...

    def wire(self) -> dict[str, Any]: ...

    def truth(self) -> dict[str, Any]: ...


def run_spawned(
    module: str, job: SpawnedJob, out: Path, timeout_s: float = 900.0, quiet: tuple[float, float] | None = None
) -> Path:
    """Run `job` through `python -m module --run SPEC OUT` and leave its traces and truth.json in `out`."""
    load_before = wait_for_quiet(*quiet) if quiet else os.getloadavg()[0]
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    spec = out.parent / f".{out.name}.json"
    spec.write_text(json.dumps(job.wire()))
    cmd = [sys.executable, "-m", module, "--run", str(spec), str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent), *sys.path])}
    proc = subprocess.run(cmd, env=env, timeout=timeout_s, check=False, start_new_session=True)
    spec.unlink(missing_ok=True)
    written = len(list(out.glob("*.pt.trace.json.gz")))
    if proc.returncode != 0 and written < job.world:
        raise RuntimeError(f"job {job.name} failed with exit code {proc.returncode}")
    machine = {"cpus": os.cpu_count(), "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}
    truth = {"job": job.wire(), **job.truth(), "machine": machine}
    calibration = out.parent / CALIBRATION.format(name=out.name)
    if calibration.exists():
        truth["planted_cost"] = planted_cost(json.loads(calibration.read_text()))
        calibration.unlink()
    (out / "truth.json").write_text(json.dumps(truth, indent=1))
    return out


def spawn_workers(worker: Callable[..., None], world: int, wire: dict[str, Any], out: Path) -> None:
    """`world` processes of `worker(rank, wire, port, out)`, as the child interpreter runs them."""
    import torch.multiprocessing as mp

    start: Any = getattr(mp, "start_processes")  # noqa: B009 - not in torch's public stubs
    start(worker, args=(wire, _free_port(), str(out)), nprocs=world, start_method="spawn")
