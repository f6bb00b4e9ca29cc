"""Real multi-rank gloo trainings on CPU, recorded with torch.profiler, with planted faults and their truth.

One `GlooJob` is one real job: `world` processes (torch.multiprocessing spawn), a small model trained with
DistributedDataParallel, each step recorded by torch.profiler, either
- `capture="profiler"`: the way users record jobs themselves (`torch.profiler.schedule` plus
  `tensorboard_trace_handler`), one `<host>_<pid>.<time>.pt.trace.json.gz` per rank in a plain folder; or
- `capture="hook"`: through stepscope's own in-process hook (a request file as the sidecar writes it), into a
  session folder `ranks/<rank>/{trace.pt.trace.json.gz, manifest.json[, stacks.txt]}`; hangs need this mode
  (the hook's watchdog dumps the stacks).

Models: `mlp`, `cnn` (small conv net), `loader` (a Dataset fed through a DataLoader with a collate_fn), `accum`
(gradient accumulation: two micro-batches per optimizer step, DDP's no_sync on the first), `transformer` (a
2-layer encoder on unpacked sequences: each rank draws its sequence length per step from `tokens`, 16-64 by
default, so healthy ranks differ from step to step as NLP jobs without packing do; `shapes` records input shapes).
Faults (`fault`, on `slow_ranks`, sized by `amount`):
- `none`; `uniform`: every rank computes `amount` times more (a code change, not a straggler);
- `compute`: the slow ranks train on `amount` times larger batches (uneven shards);
- `collate`: the slow ranks' collate_fn burns `amount` ms of CPU in plain Python (no annotation);
- `python`: `amount` ms of plain-Python preprocessing before forward (no annotation);
- `sleep_log`: a logging call that sleeps `amount` ms after the optimizer step (a slow metrics sink);
- `gc`: a large heap of cyclic objects and a gc.collect() per step (garbage-collection pressure);
- `annotated`: `amount` ms of input work inside a `record_function` region with a user's own name;
- `periodic`: every `period` steps the slow rank blocks `amount` ms after its optimizer step (a checkpoint written
  to slow storage), an intermittent stall; `periodic_cpu`: the same as `amount` ms of plain-Python CPU work (an
  evaluation pass);
- `hang_data`: after a few steps the slow rank blocks forever inside its data loading;
- `hang_collective`: after a few steps the slow rank enters a barrier while the others all-reduce;
- `copies` (device="cuda"): every rank copies its input batch from host memory `amount` times per step, the slow
  ranks from pageable memory, the others from pinned memory (a DataLoader without pin_memory on some nodes).
`device="cuda"`: every rank trains on the machine's first GPU (gloo moves the gradients through the host, so
several ranks may share one GPU), its inputs made on the GPU and its labels copied there, on images of `CUDA_IMAGE`
pixels so that the GPU's work dominates the step; CUDA activity is recorded too.
`truth()` says what a correct diagnosis names. Run as a script: `python -m stepscope_testing.gloo_jobs OUT ...`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST_FAULTS = ("collate", "python", "sleep_log", "gc", "annotated", "periodic", "periodic_cpu")
HANG_FAULTS = ("hang_data", "hang_collective")
FAULTS = ("none", "uniform", "compute", "copies", *HOST_FAULTS, *HANG_FAULTS)
MODELS = ("mlp", "cnn", "loader", "accum", "transformer")
DEVICES = ("cpu", "cuda")
D_MODEL = 128
CUDA_IMAGE = (3, 128, 128)
WARMUP_STEPS = 2
HANG_AFTER = 3


@dataclass(frozen=True)
class GlooJob:
    name: str
    world: int
    model: str = "mlp"
    fault: str = "none"
    slow_ranks: tuple[int, ...] = ()
    amount: float = 0.0
    steps: int = 8
    capture: str = "profiler"
    seed: int = 0
    batch: int = 128
    cycles: int = 1
    """recording cycles of torch.profiler's schedule (its `repeat`): one trace per rank per cycle"""
    period: int = 3
    """steps between two stalls of the periodic faults"""
    shapes: bool = False
    """record the ops' input shapes (torch.profiler's record_shapes; the hook's recordShapes)"""
    tokens: tuple[int, int] = (16, 64)
    """the transformer's tokens per sequence: drawn per rank and step from this range"""
    device: str = "cpu"
    """"cuda": train on the first GPU and record CUDA activity too (module docstring)"""

    def truth(self) -> dict[str, Any]:
        """What a correct diagnosis says: the slow ranks and their cause (none for balanced/uniform jobs)."""
        if self.fault in ("none", "uniform"):
            return {"slow_ranks": [], "kind": "balanced" if self.fault == "none" else "uniform"}
        cause = {"compute": "compute", "copies": "memory"}.get(self.fault, "host")
        if self.fault in HANG_FAULTS:
            cause = "hang"
        return {
            "slow_ranks": [{"rank": r, "cause": cause} for r in self.slow_ranks],
            "kind": self.fault,
            "hang": self.fault in HANG_FAULTS,
        }

    def wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _Fault:
    job: GlooJob
    rank: int
    heap: list[Any] = field(default_factory=list)

    @property
    def slow(self) -> bool:
        return self.rank in self.job.slow_ranks

    def active(self, kind: str) -> bool:
        return self.slow and self.job.fault == kind

    def batch(self) -> int:
        scale = 1.0
        if self.job.fault == "uniform" or self.active("compute"):
            scale = self.job.amount
        return max(1, round(self.job.batch * scale))


def _burn_python(ms: float) -> int:
    """Plain-Python CPU work for about `ms` milliseconds (no torch op, no annotation)."""
    end = time.perf_counter() + ms / 1000.0
    acc = 0
    while time.perf_counter() < end:
        for i in range(200):
            acc = (acc * 31 + i) % 1_000_003
    return acc


def _make_model(kind: str) -> Any:
    from torch import nn

    if kind == "transformer":

        class Encoder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=2 * D_MODEL, batch_first=True)
                self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
                self.head = nn.Linear(D_MODEL, 10)

            def forward(self, x: Any) -> Any:
                return self.head(self.encoder(x).mean(dim=1))

        return Encoder()
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(64 * 16, 10),
        )
    return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


class _Samples:
    """A map-style dataset of random samples (torch.utils.data.Dataset protocol)."""

    def __init__(self, n: int, shape: tuple[int, ...], hang_rank: bool) -> None:
        self.n = n
        self.shape = shape
        self.hang_rank = hang_rank
        self.served = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import torch

        return torch.randn(*self.shape), torch.tensor(index % 10)


def _collate(fault: _Fault) -> Any:
    import torch

    def collate(items: list[tuple[Any, Any]]) -> tuple[Any, Any]:
        if fault.active("collate"):
            _burn_python(fault.job.amount)  # e.g. per-sample augmentation written in Python
        xs = torch.stack([x for x, _ in items])
        ys = torch.stack([y for _, y in items])
        return xs, ys

    return collate


def _batches(fault: _Fault, shape: tuple[int, ...]) -> Any:
    """Endless (x, y) batches: through a DataLoader for the `loader` model, else made in the loop (inputs on the
    training device, labels made on the host)."""
    import torch

    batch = fault.batch()
    device = fault.job.device
    if fault.job.model == "loader":
        data = _Samples(batch * 10_000, shape, fault.active("hang_data"))
        dataset: Any = data
        loader: Any = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=False, collate_fn=_collate(fault))
        while True:
            yield from loader
    if fault.job.fault == "copies":
        host = torch.randn(batch, *shape)
        host = host if fault.slow else host.pin_memory()
        while True:
            for _ in range(max(1, round(fault.job.amount))):
                x = host.to(device, non_blocking=True)
            yield x, torch.randint(0, 10, (batch,))
    if fault.job.model == "transformer":
        lengths = random.Random(fault.job.seed * 1000 + fault.rank)  # noqa: S311 - a seeded workload, not a secret
        while True:
            tokens = lengths.randint(*fault.job.tokens)
            yield torch.randn(batch, tokens, D_MODEL, device=device), torch.randint(0, 10, (batch,))
    while True:
        yield torch.randn(batch, *shape, device=device), torch.randint(0, 10, (batch,))


def _wait_forever() -> None:
    while True:
        time.sleep(3600)  # a stuck input pipeline (a dead worker, a lost file handle)


def _before_forward(fault: _Fault, step: int) -> None:
    import torch

    if fault.active("python"):
        _burn_python(fault.job.amount)  # preprocessing in plain Python
    if fault.active("annotated"):
        with torch.profiler.record_function("prefetch_shard"):
            _burn_python(fault.job.amount)
    if fault.active("hang_data") and step >= WARMUP_STEPS + HANG_AFTER:
        _wait_forever()


def _after_step(fault: _Fault, step: int) -> None:
    import torch.distributed as dist

    if fault.active("sleep_log"):
        time.sleep(fault.job.amount / 1000.0)  # "log_metrics": a blocking write to a slow sink
    if fault.active("periodic") and step % fault.job.period == 0:
        time.sleep(fault.job.amount / 1000.0)  # every few steps: a checkpoint written by this rank only
    if fault.active("periodic_cpu") and step % fault.job.period == 0:
        _burn_python(fault.job.amount)  # every few steps: an evaluation pass in Python on this rank only
    if fault.active("gc"):
        fault.heap.extend([{"step": step, "i": i, "self": None} for i in range(20_000)])
        for item in fault.heap[-20_000:]:
            item["self"] = item  # cycles only the collector frees
        gc.collect()
    if fault.active("hang_collective") and step >= WARMUP_STEPS + HANG_AFTER:
        dist.barrier()  # the others are in their next all_reduce: a desync


def _train_step(model: Any, opt: Any, batches: Any, fault: _Fault, step: int) -> None:
    import torch

    loss_fn = torch.nn.CrossEntropyLoss()
    micro = 2 if fault.job.model == "accum" else 1
    opt.zero_grad()
    for m in range(micro):
        x, y = next(batches)
        x, y = x.to(fault.job.device, non_blocking=True), y.to(fault.job.device, non_blocking=True)
        _before_forward(fault, step)
        sync = model.no_sync() if m < micro - 1 else contextlib.nullcontext()
        with sync:
            loss = loss_fn(model(x), y) / micro
            loss.backward()
    opt.step()
    _after_step(fault, step)


def _profiler(job: GlooJob, out: Path, rank: int) -> Any:
    import torch

    if job.capture != "profiler":
        return contextlib.nullcontext(None)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if job.device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(wait=1, warmup=WARMUP_STEPS - 1, active=job.steps, repeat=job.cycles),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out), use_gzip=True),
        record_shapes=job.shapes,
    )


def _worker(rank: int, job_wire: dict[str, Any], port: int, out: str, hook_dir: str) -> None:
    job = GlooJob(**{**job_wire, "slow_ranks": tuple(job_wire["slow_ranks"]), "tokens": tuple(job_wire["tokens"])})
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank)})
    os.environ["WORLD_SIZE"] = str(job.world)
    if job.capture == "hook":
        os.environ["STEPSCOPE_POD_NAME"] = f"{job.name}-{rank}"
        os.environ["STEPSCOPE_NODE_NAME"] = f"node-{rank // 2}"
        import stepscope_hook

        stepscope_hook.activate(str(Path(hook_dir) / f"rank-{rank}"))
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    torch.manual_seed(job.seed)
    dist.init_process_group("gloo", rank=rank, world_size=job.world, timeout=datetime.timedelta(seconds=600))
    shape = (3, 16, 16) if job.model == "cnn" else (512,)
    if job.device == "cuda":
        torch.cuda.set_device(0)
        shape = CUDA_IMAGE if job.model == "cnn" else shape
        model = DistributedDataParallel(_make_model(job.model).to(job.device), device_ids=[0])
    else:
        model = DistributedDataParallel(_make_model(job.model))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    fault = _Fault(job, rank)
    if fault.active("gc"):
        fault.heap = [[i] for i in range(300_000)]  # a large, long-lived cache of Python objects
    batches = _batches(fault, shape)
    total = job.cycles * (WARMUP_STEPS + job.steps) + (1 if job.capture == "profiler" else 2)
    with _profiler(job, Path(out), rank) as prof:
        for step in range(total):
            _train_step(model, opt, batches, fault, step)
            if prof is not None:
                prof.step()
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    """The rendezvous port: below the ephemeral range where the local cluster is installed (stepscope_local.ports:
    a port-0 port can go to any connection opened before torch binds it), else any free port (recording jobs on
    another machine with only testing/ and sidecar/ on the path, tools/record_gpu_jobs.py)."""
    try:
        from stepscope_local.ports import free_port
    except ImportError:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    return free_port()


def _write_requests(job: GlooJob, hook_dir: Path) -> str:
    capture_id = f"corpus-{hashlib.sha256(job.name.encode()).hexdigest()[:10]}"
    request = {
        "captureId": capture_id,
        "steps": job.steps,
        "skipSteps": 1,
        "activities": ["cpu", "cuda"] if job.device == "cuda" else ["cpu"],
        "stepTimeoutSeconds": 30.0 if job.device == "cuda" else 4.0,  # CUDA's first profiled step starts CUPTI
        "recordShapes": job.shapes,
        "requestedAt": time.time(),
    }
    for rank in range(job.world):
        folder = hook_dir / f"rank-{rank}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "request.json").write_text(json.dumps(request))
    return capture_id


def _collect_hook_outputs(job: GlooJob, hook_dir: Path, capture_id: str, out: Path) -> None:
    """What the sidecars would upload: ranks/<rank>/{trace, stacks, manifest} from each rank's hook folder."""
    for rank in range(job.world):
        src = hook_dir / f"rank-{rank}" / "captures" / capture_id / f"rank-{rank}"
        dst = out / "ranks" / str(rank)
        dst.mkdir(parents=True, exist_ok=True)
        meta = json.loads((src / "meta.json").read_text()) if (src / "meta.json").exists() else None
        files = []
        for name in ("trace.pt.trace.json.gz", "stacks.txt"):
            if (src / name).exists():
                shutil.copyfile(src / name, dst / name)
                data = (dst / name).read_bytes()
                files.append({"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        hung = bool(meta and meta.get("hung"))
        state = "hung" if hung else ("uploaded" if (dst / "trace.pt.trace.json.gz").exists() else "failed")
        manifest = {
            "schemaVersion": 1,
            "captureId": capture_id,
            "namespace": "corpus",
            "session": job.name,
            "pod": f"{job.name}-{rank}",
            "node": f"node-{rank // 2}",
            "rank": rank,
            "state": state,
            "files": files,
            "meta": meta,
            "errors": [] if meta else ["the hook wrote nothing"],
        }
        (dst / "manifest.json").write_text(json.dumps(manifest))


def _await_hang(hook_dir: Path, capture_id: str, world: int, deadline: float) -> None:
    """Wait until every rank's watchdog has declared the hang (its meta.json says hung)."""
    while time.monotonic() < deadline:
        hung = 0
        for rank in range(world):
            meta = hook_dir / f"rank-{rank}" / "captures" / capture_id / f"rank-{rank}" / "meta.json"
            with contextlib.suppress(OSError, ValueError):
                hung += bool(json.loads(meta.read_text()).get("hung"))
        if hung == world:
            return
        time.sleep(0.5)


def wait_for_quiet(max_load: float, max_wait_s: float) -> float:
    """Wait (at most `max_wait_s`) until the machine's 1-minute load average is at most `max_load`; return it.

    The machine may be shared: a job recorded while other work oversubscribes the CPU several times over measures
    that work more than its own planted fault, so the corpus waits for a quieter moment and records the load."""
    deadline = time.monotonic() + max_wait_s
    load = os.getloadavg()[0]
    while load > max_load and time.monotonic() < deadline:
        time.sleep(5.0)
        load = os.getloadavg()[0]
    return load


def run_job(job: GlooJob, out: Path, timeout_s: float = 900.0, quiet: tuple[float, float] | None = None) -> Path:
    """Run `job` (its processes in a child interpreter) and leave its traces and truth.json in `out`.

    `quiet` = (load, seconds): first wait up to that long for a 1-minute load average at most that high."""
    load_before = wait_for_quiet(*quiet) if quiet else os.getloadavg()[0]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    work = out.parent / f".{out.name}.work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    capture_id = _write_requests(job, work) if job.capture == "hook" else ""
    spec = work / "job.json"
    spec.write_text(json.dumps(job.wire()))
    trace_out = out if job.capture == "profiler" else work / "profiler"
    cmd = [sys.executable, "-m", "stepscope_testing.gloo_jobs", "--run", str(spec), str(trace_out), str(work)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent), *sys.path])}
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        if job.fault in HANG_FAULTS:
            _await_hang(work, capture_id, job.world, time.monotonic() + timeout_s)
            raise subprocess.TimeoutExpired(cmd, 0)
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
    written = len(list(trace_out.glob("*.pt.trace.json.gz"))) if job.capture == "profiler" else job.world
    if job.fault not in HANG_FAULTS and proc.returncode != 0 and written < job.world * job.cycles:
        # a crash while tearing down the process group after every trace was written does not spoil the job
        raise RuntimeError(f"job {job.name} failed with exit code {proc.returncode}")
    if job.capture == "hook":
        _collect_hook_outputs(job, work, capture_id, out)
    machine = {"cpus": os.cpu_count(), "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}
    (out / "truth.json").write_text(json.dumps({"job": job.wire(), **job.truth(), "machine": machine}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return out


def _spawn(spec: Path, trace_out: Path, work: Path) -> None:
    import torch.multiprocessing as mp

    wire = json.loads(spec.read_text())
    start: Any = getattr(mp, "start_processes")  # noqa: B009 - not in torch's public stubs
    start(_worker, args=(wire, _free_port(), str(trace_out), str(work)), nprocs=wire["world"], start_method="spawn")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run one real gloo job of the scenario corpus")
    p.add_argument("--run", nargs=3, metavar=("SPEC", "TRACE_OUT", "WORK"), help=argparse.SUPPRESS)
    p.add_argument("out", nargs="?")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--model", choices=MODELS, default="mlp")
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--slow-ranks", default="")
    p.add_argument("--amount", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--capture", choices=["profiler", "hook"], default="profiler")
    p.add_argument("--device", choices=DEVICES, default="cpu")
    a = p.parse_args(argv)
    if a.run:
        _spawn(Path(a.run[0]), Path(a.run[1]), Path(a.run[2]))
        return 0
    if not a.out:
        p.error("OUT is required")
    slow = tuple(int(x) for x in a.slow_ranks.split(",") if x.strip())
    job = GlooJob(
        name=Path(a.out).name,
        world=a.world,
        model=a.model,
        fault=a.fault,
        slow_ranks=slow,
        amount=a.amount,
        steps=a.steps,
        capture=a.capture,
        device=a.device,
    )
    run_job(job, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
