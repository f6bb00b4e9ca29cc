"""Step time of a ~10 ms CPU training step: without the hook, with the idle hook, and while the hook captures,
beside plain torch.profiler on the same steps. One process, interleaved blocks, medians. Exit 1 if the idle
overhead (the hook's measured cost per step boundary over the step time) is 0.5% or more, or if the hook with step
telemetry on (its boundary writing the step into the ring file, plus the timing of one backward() call) costs 0.1%
of the step or more; the end-to-end median ratio is printed beside them, but on a shared machine its noise is larger
than the effect.

Then the Python stack sampler (capture.pythonSampling) at 50, 100 and 200 Hz while torch.profiler records, against
the same capture without it: its sampling thread's own CPU time over the wall time (the GIL serialises it with the
training thread: the share of a step it can take), and the median step time with it over the median without it
(interleaved blocks, ABBA). Off, it starts no thread: 0. Exit 1 if the direct cost at the default rate is 1% of a
step or more.

Then the cost of PyTorch's Flight Recorder, which injection turns on (TORCH_FR_BUFFER_SIZE, 2000 entries by
default): the time of one collective with the recorder off and on (a one-rank gloo group, so that the network's
noise does not hide the recording; the fastest of 40 blocks per child process; child processes in ABBA order,
since the buffer size is read once per process),
called from a shallow and from a 40-frame-deep Python stack (each entry keeps the Python stack that issued it), and
the memory one entry holds.

    .venv/bin/python bench/hook_overhead.py [--blocks 10] [--steps-per-block 40] [--fr-rounds 6] [--sampler-blocks 12]
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
from stepscope_contract.session import CaptureSpec
from stepscope_hook._runtime import Hook
from stepscope_hook._sampler import SAMPLER_THREAD, StackSampler
from stepscope_hook._telemetry import ENV_SWITCH, _Timing

IDLE_BAR = 0.005
TELEMETRY_BAR = 0.001
SAMPLER_BAR = 0.01
SAMPLER_RATES = (50, 100, 200)


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
    p.add_argument("--sampler-blocks", type=int, default=12, help="block pairs (on/off) per sampling rate")
    p.add_argument("--only-sampler", action="store_true", help="measure the stack sampler alone")
    p.add_argument("--fr-child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--fr-depth", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.fr_child is not None:
        return fr_child(args.fr_depth)
    torch.set_num_threads(1)
    _opt, step = make_step(args.target_ms)
    if args.only_sampler:
        return 0 if sampler_cost(step, args.sampler_blocks, args.steps_per_block) else 1
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

    # 2. the hook's own idle cost per boundary, measured directly (the figure noise cannot hide): with step telemetry
    # off and on (the deployed default), in alternating rounds; plus what timing one backward() call adds
    n = 200_000
    per_call, per_call_off, wrapper = direct_costs(n)

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
    print(f"hook idle cost per step        {per_call_off * 1e6:8.3f} us (direct, {n} calls, step telemetry off)")
    telemetry = per_call + wrapper - per_call_off
    print(
        f"hook idle cost per step        {per_call * 1e6:8.3f} us (direct, step telemetry on: the ring write)"
        f" + {wrapper * 1e6:.3f} us (timing one backward() call)"
    )
    print(f"step telemetry's own cost      {telemetry * 1e6:8.3f} us per step")
    print(
        f"step (hook capturing)   median {m_cap * 1e3:8.3f} ms over {len(captured)} steps;"
        f" export {t_export * 1e3:.1f} ms"
    )
    print(
        f"step (torch.profiler)   median {m_prof * 1e3:8.3f} ms over {len(prof_steps)} steps;"
        f" export {plain_export * 1e3:.1f} ms"
    )
    direct = per_call_off / m_plain
    with_telemetry = (per_call + wrapper) / m_plain
    print(f"ratio idle/no-hook (medians)   {m_idle / m_plain:.4f}")
    print(f"ratio idle/no-hook (median of {len(pair_ratios)} block pairs) {statistics.median(pair_ratios):.4f}")
    print(f"idle overhead (direct)         {direct * 100:.4f} % of a step  (bar < {IDLE_BAR * 100:.1f} %)")
    print(
        f"overhead, telemetry on         {with_telemetry * 100:.4f} % of a {m_plain * 1e3:.1f} ms step"
        f"  (bar < {TELEMETRY_BAR * 100:.1f} %; ratio to the bar {with_telemetry / TELEMETRY_BAR:.3f})"
    )
    print(f"ratio capturing/no-hook        {m_cap / m_plain:.4f}")
    print(f"ratio torch.profiler/no-hook   {m_prof / m_plain:.4f}")
    print(f"ratio capturing/torch.profiler {m_cap / m_prof:.4f}")
    ok = direct < IDLE_BAR and with_telemetry < TELEMETRY_BAR
    print("idle overhead and telemetry overhead under their bars" if ok else "OVERHEAD OVER THE BAR")
    ok = sampler_cost(step, args.sampler_blocks, args.steps_per_block) and ok
    flight_recorder_cost(args.fr_rounds, m_plain)
    return 0 if ok else 1


def sampler_cost(step: object, blocks: int, steps_per_block: int) -> bool:
    """The stack sampler while torch.profiler records: per rate, its thread's CPU time over the wall time (direct)
    and the median step with it over the median step without it (ABBA blocks); whether the default rate's direct
    cost is under SAMPLER_BAR."""
    import threading

    import torch.profiler as tp

    default = CaptureSpec().python_sampling
    print(f"\nPython stack sampler while torch.profiler records ({blocks} block pairs of {steps_per_block} steps per "
          f"rate; default capture.pythonSampling = {default} Hz):")  # fmt: skip
    before = {t.name for t in threading.enumerate()}
    print(f"  off: no sampling thread ({SAMPLER_THREAD not in before}), cost 0")
    tid = threading.get_ident()
    direct: dict[int, float] = {}
    with tp.profile(activities=[tp.ProfilerActivity.CPU]):
        timed(step, 10)
        for hz in SAMPLER_RATES:
            on: list[float] = []
            off: list[float] = []
            pairs: list[float] = []
            cpu = wall = 0.0
            for block in range(blocks):
                for sampling in (True, False) if block % 2 == 0 else (False, True):
                    sampler = StackSampler(hz, tid) if sampling else None
                    t0 = time.perf_counter()
                    if sampler is not None:
                        sampler.start()
                    times = timed(step, steps_per_block)
                    if sampler is not None:
                        sampler.stop()
                        cpu += sampler.cpu_s
                        wall += time.perf_counter() - t0
                    (on if sampling else off).extend(times)
                pairs.append(statistics.median(on[-steps_per_block:]) / statistics.median(off[-steps_per_block:]))
            direct[hz] = cpu / wall if wall else 0.0
            ratio = statistics.median(on) / statistics.median(off)
            print(f"  {hz:3d} Hz: direct {direct[hz] * 100:.3f} % of a step (sampling thread CPU / wall); "
                  f"step with/without {ratio:.4f} (medians; {statistics.median(pairs):.4f} median of block pairs; "
                  f"{statistics.median(off) * 1e3:.2f} ms step)")  # fmt: skip
    at_default = direct.get(default, 0.0) if default else 0.0
    ok = at_default < SAMPLER_BAR
    print(f"  default {default} Hz: {at_default * 100:.3f} % of a step (bar < {SAMPLER_BAR * 100:.0f} %; ratio to the "
          f"bar {at_default / SAMPLER_BAR:.3f})" if default else "  default: off")  # fmt: skip
    return ok


def direct_costs(calls: int, rounds: int = 6) -> tuple[float, float, float]:
    """(per boundary with step telemetry on, per boundary with it off, the backward() timing wrapper per call), the
    median of `rounds` alternating rounds of `calls` calls each, on hooks of their own."""
    hooks = {}
    for on in (True, False):
        os.environ[ENV_SWITCH] = "1" if on else "0"
        hooks[on] = Hook(tempfile.mkdtemp(prefix="stepscope-bench-"), poll_seconds=0.2)
        hooks[on].on_step()  # registers (the recorder opens here when on)
    os.environ.pop(ENV_SWITCH, None)
    assert hooks[True].telemetry is not None and hooks[False].telemetry is None
    costs: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            on_step = hooks[on].on_step
            t0 = time.perf_counter()
            for _ in range(calls):
                on_step()
            costs[on].append((time.perf_counter() - t0) / calls)
    for h in hooks.values():
        h.enabled = False

    def plain(x: int) -> int:
        return x

    timed = _Timing.wrap(plain, "backward_s")
    _Timing.recorder = hooks[True].telemetry
    deltas = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(calls):
            plain(i)
        t1 = time.perf_counter()
        for i in range(calls):
            timed(i)
        deltas.append(((time.perf_counter() - t1) - (t1 - t0)) / calls)
    return statistics.median(costs[True]), statistics.median(costs[False]), max(statistics.median(deltas), 0.0)


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
