"""Step time of a ~10 ms CPU training step: without the hook, with the idle hook, and while the hook captures,
beside plain torch.profiler on the same steps. One process, interleaved blocks, medians. Exit 1 if the idle
overhead (the hook's measured cost per step boundary over the step time) is 0.5% or more; the end-to-end
median ratio is printed beside it, but on a shared machine its noise is larger than the effect.

Then the cost of PyTorch's Flight Recorder, which injection turns on (TORCH_FR_BUFFER_SIZE, 2000 entries by
default): the time of one collective with the recorder off and on (a one-rank gloo group, so that the network's
noise does not hide the recording; the fastest of 40 blocks per child process; child processes in ABBA order,
since the buffer size is read once per process),
called from a shallow and from a 40-frame-deep Python stack (each entry keeps the Python stack that issued it), and
the memory one entry holds.

    .venv/bin/python bench/hook_overhead.py [--blocks 10] [--steps-per-block 40] [--fr-rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sidecar"))
from stepscope_hook._runtime import Hook

IDLE_BAR = 0.005


def make_step(target_ms: float) -> tuple[torch.optim.Optimizer, object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch = 64

    def one() -> None:
        opt.zero_grad(set_to_none=True)
        model(torch.randn(batch, 256)).pow(2).mean().backward()
        opt.step()

    for _ in range(5):  # calibrate the batch so that a step takes about target_ms
        t0 = time.perf_counter()
        for _ in range(5):
            one()
        per = (time.perf_counter() - t0) / 5 * 1000
        batch = max(8, int(batch * target_ms / per))
    return opt, one


def timed(step: object, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=30)
    p.add_argument("--steps-per-block", type=int, default=15)
    p.add_argument("--capture-steps", type=int, default=20)
    p.add_argument("--target-ms", type=float, default=10.0)
    p.add_argument("--fr-rounds", type=int, default=6, help="paired runs (off/on) of the Flight Recorder cost")
    p.add_argument("--fr-child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--fr-depth", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.fr_child is not None:
        return fr_child(args.fr_depth)
    torch.set_num_threads(1)
    _opt, step = make_step(args.target_ms)
    hook_dir = tempfile.mkdtemp(prefix="stepscope-bench-")
    hook = Hook(hook_dir, poll_seconds=0.2)
    import torch.optim.optimizer as optim_module

    register = optim_module.register_optimizer_step_post_hook

    # 1. interleaved blocks in ABBA order (drift and warm-up hit both sides alike): no hook / idle hook
    plain: list[float] = []
    idle: list[float] = []
    pair_ratios: list[float] = []
    timed(step, 20)
    for block in range(args.blocks):
        for with_hook in (False, True) if block % 2 == 0 else (True, False):
            handle = register(hook.optimizer_hook) if with_hook else None
            times = timed(step, args.steps_per_block)
            if handle is not None:
                handle.remove()
            (idle if with_hook else plain).extend(times)
        pair_ratios.append(
            statistics.median(idle[-args.steps_per_block :]) / statistics.median(plain[-args.steps_per_block :])
        )

    # 2. the hook's own idle cost per boundary, measured directly (the figure noise cannot hide)
    n = 200_000
    t0 = time.perf_counter()
    for _ in range(n):
        hook.on_step()
    per_call = (time.perf_counter() - t0) / n

    # 3. capture: the hook recording N steps vs plain torch.profiler on N steps
    handle = register(hook.optimizer_hook)
    request = {"captureId": "bench", "steps": args.capture_steps, "skipSteps": 0, "activities": ["cpu"]}
    request["requestedAt"] = time.time()
    Path(hook_dir, "request.json").write_text(json.dumps(request))
    hook.next_check = 0.0
    step()  # the boundary that arms and starts it
    t_export = 0.0
    captured: list[float] = []
    while hook.active is not None:
        t0 = time.perf_counter()
        step()
        d = time.perf_counter() - t0
        if hook.active is None:
            t_export = d  # the last boundary stops the profiler and writes the trace
        else:
            captured.append(d)
    handle.remove()
    trace = Path(hook_dir, "captures", "bench", "rank-0", "trace.pt.trace.json.gz")
    assert trace.exists(), "the hook wrote no trace"

    import torch.profiler as tp

    prof_steps: list[float] = []
    export_s: list[float] = []

    def export(p: tp.profile) -> None:
        t = time.perf_counter()
        p.export_chrome_trace(os.path.join(hook_dir, "plain.pt.trace.json.gz"))
        export_s.append(time.perf_counter() - t)

    schedule = tp.schedule(wait=0, warmup=1, active=args.capture_steps, repeat=1)
    with tp.profile(activities=[tp.ProfilerActivity.CPU], schedule=schedule, on_trace_ready=export) as prof:
        for _ in range(args.capture_steps + 1):
            t0 = time.perf_counter()
            step()
            prof.step()
            prof_steps.append(time.perf_counter() - t0)
    plain_export = export_s[0] if export_s else float("nan")
    prof_steps = prof_steps[1:-1]  # the warm-up step and the step whose prof.step() exports

    m_plain, m_idle = statistics.median(plain), statistics.median(idle)
    m_cap, m_prof = statistics.median(captured), statistics.median(prof_steps)
    print(f"step (no hook)          median {m_plain * 1e3:8.3f} ms over {len(plain)} steps")
    print(f"step (idle hook)        median {m_idle * 1e3:8.3f} ms over {len(idle)} steps")
    print(f"hook idle cost per step        {per_call * 1e6:8.3f} us (direct, {n} calls)")
    print(
        f"step (hook capturing)   median {m_cap * 1e3:8.3f} ms over {len(captured)} steps;"
        f" export {t_export * 1e3:.1f} ms"
    )
    print(
        f"step (torch.profiler)   median {m_prof * 1e3:8.3f} ms over {len(prof_steps)} steps;"
        f" export {plain_export * 1e3:.1f} ms"
    )
    direct = per_call / m_plain
    print(f"ratio idle/no-hook (medians)   {m_idle / m_plain:.4f}")
    print(f"ratio idle/no-hook (median of {len(pair_ratios)} block pairs) {statistics.median(pair_ratios):.4f}")
    print(f"idle overhead (direct)         {direct * 100:.4f} % of a step  (bar < {IDLE_BAR * 100:.1f} %)")
    print(f"ratio capturing/no-hook        {m_cap / m_plain:.4f}")
    print(f"ratio torch.profiler/no-hook   {m_prof / m_plain:.4f}")
    print(f"ratio capturing/torch.profiler {m_cap / m_prof:.4f}")
    ok = direct < IDLE_BAR
    print("idle overhead under the bar" if ok else "IDLE OVERHEAD OVER THE BAR")
    flight_recorder_cost(args.fr_rounds, m_plain)
    return 0 if ok else 1


FR_BUFFER = 2000


def fr_child(depth: int) -> int:
    """One process: a one-rank gloo group, per-collective time (median of blocks) and memory per recorded entry."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    tensor = torch.ones(4)

    def deep(n: int, calls: int) -> None:
        if n > 1:
            deep(n - 1, calls)
            return
        for _ in range(calls):
            dist.all_reduce(tensor)

    def rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    dist.barrier()
    before = rss()
    deep(depth, FR_BUFFER)  # exactly fills the buffer: FR_BUFFER entries recorded (none when it is off)
    grown = rss() - before
    deep(depth, 500)
    blocks = []
    for _ in range(40):
        t0 = time.perf_counter()
        deep(depth, 250)
        blocks.append((time.perf_counter() - t0) / 250)
    # the fastest block: on a shared machine, the others are the neighbours' noise, not the recorder's cost
    print(json.dumps({"us": min(blocks) * 1e6, "grown": grown}))
    dist.destroy_process_group()
    return 0


def _fr_run(buffer: int, depth: int) -> dict[str, float]:
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE=str(buffer), OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, __file__, "--fr-child", str(buffer), "--fr-depth", str(depth)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def flight_recorder_cost(rounds: int, step_s: float) -> None:
    """Flight Recorder off vs on, paired runs in ABBA order; the figures the injection default is documented with."""
    print(f"\nFlight Recorder (TORCH_FR_BUFFER_SIZE={FR_BUFFER}) on a one-rank gloo group, {rounds} paired runs:")
    for depth in (1, 40):
        deltas: list[float] = []
        offs: list[float] = []
        grown: list[float] = []
        for r in range(rounds):
            order = (0, FR_BUFFER) if r % 2 == 0 else (FR_BUFFER, 0)
            res = {b: _fr_run(b, depth) for b in order}
            deltas.append(res[FR_BUFFER]["us"] - res[0]["us"])
            offs.append(res[0]["us"])
            grown.append(res[FR_BUFFER]["grown"] - res[0]["grown"])
        delta = statistics.median(deltas)
        per_entry = statistics.median(grown) / FR_BUFFER
        print(
            f"  stack depth {depth:2d}: collective {statistics.median(offs):7.2f} us off, {delta:+6.2f} us on "
            f"(paired deltas {min(deltas):+.2f}..{max(deltas):+.2f}); "
            f"{delta / (step_s * 1e6) * 100:.3f} % of a {step_s * 1e3:.1f} ms step per collective; "
            f"~{per_entry / 1024:.2f} KiB per entry, {per_entry * FR_BUFFER / 2**20:.1f} MiB for {FR_BUFFER} entries"
        )


if __name__ == "__main__":
    raise SystemExit(main())
