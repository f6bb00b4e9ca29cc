"""Multi-rank GPU jobs derived from one real Kineto trace through a collective timing model.

A real rank's trace (e.g. the HTA test traces in tests/analyzer_job/fixtures/hta, MIT License, Copyright Meta
Platforms) is replicated to `world` ranks and re-timed:
- its recorded steps can be repeated (`repeat`) so that there are enough steps to compare;
- each rank's compute kernels and memory ops take `scale[r]` times as long, times jitter: a per-rank device
  factor, a per-step factor and a per-kernel factor (log-normal, `jitter` is their spread);
- `copy_scale[r]`: that rank's memory copies and sets alone take that many times as long (pageable instead of
  pinned host memory, a slower PCIe link): the extra time is in memory ops, not in compute kernels;
- `host_stall_us[r]`: at the start of every step (or every `stall_every`-th step: an intermittent stall) that
  rank's host is late by that much before it launches anything (a stall without any annotation: the CPU events
  move, nothing marks the gap); the GPU waits for it;
- every collective kernel (NCCL) starts on each rank once that rank's earlier work is done and ends on every rank
  when the last rank has arrived plus the collective's own recorded duration, so the ranks that arrive early wait
  inside it; compute waits for a collective's result after each one but the gradient all-reduces that overlap
  the backward pass, and after the last one of each step (the optimizer needs every gradient);
- host events move with their rank's delay at the start of their step; a step span ends when its GPU work ends.
The output is one `rank<R>.pt.trace.json.gz` per rank (distributedInfo says the rank and world size) and a
truth.json. Flow events (`ph` s/f/t) and GPU-side annotations are dropped; every other event keeps its fields.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
FLOW_PHASES = frozenset({"s", "f", "t"})
DROPPED_CATS = frozenset({"gpu_user_annotation"})


@dataclass(frozen=True)
class GpuJob:
    name: str
    source: str
    world: int
    scale: dict[int, float] = field(default_factory=dict)
    host_stall_us: dict[int, float] = field(default_factory=dict)
    copy_scale: dict[int, float] = field(default_factory=dict)
    jitter: float = 0.01
    stall_every: int = 1
    """host stalls land on every `stall_every`-th step only (1: every step; 3: a checkpoint every third step)"""
    repeat: int = 1
    seed: int = 0

    def truth(self) -> dict[str, Any]:
        slow = [{"rank": r, "cause": "compute"} for r, f in sorted(self.scale.items()) if f > 1.0]
        slow += [{"rank": r, "cause": "host"} for r, us in sorted(self.host_stall_us.items()) if us > 0]
        slow += [{"rank": r, "cause": "memory"} for r, f in sorted(self.copy_scale.items()) if f > 1.0]
        uniform = bool(self.scale) and len(self.scale) == self.world and len(set(self.scale.values())) == 1
        if uniform:
            slow = []
        kind = "uniform" if uniform else ("balanced" if not slow else "straggler")
        return {"slow_ranks": slow, "kind": kind}


def _load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    doc: dict[str, Any] = orjson.loads(data)
    return doc


def _is_gpu(e: dict[str, Any]) -> bool:
    return e.get("cat") in GPU_CATS


def _steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "user_annotation"
        and str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    return sorted(steps, key=lambda e: e["ts"])


def repeat_steps(events: list[dict[str, Any]], times: int) -> list[dict[str, Any]]:
    """The recorded steps `times` times in a row (copies shifted in time, ids kept unique, steps renumbered)."""
    steps = _steps(events)
    if times <= 1 or not steps:
        return events
    lo, hi = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    span = hi - lo
    top_corr = max((int(e.get("args", {}).get("correlation", 0) or 0) for e in events), default=0) + 1
    top_ext = max((int(e.get("args", {}).get("External id", 0) or 0) for e in events), default=0) + 1
    inside = [e for e in events if e.get("ph") == "X" and lo <= e["ts"] < hi]
    out = [e for e in events if not (e.get("ph") == "X" and e["ts"] >= hi)]
    for k in range(1, times):
        for e in inside:
            c = copy.deepcopy(e)
            c["ts"] = e["ts"] + k * span
            args = c.get("args")
            if isinstance(args, dict):
                if isinstance(args.get("correlation"), int) and args["correlation"] > 0:
                    args["correlation"] += k * top_corr
                if isinstance(args.get("External id"), int) and args["External id"] > 0:
                    args["External id"] += k * top_ext
            if str(c.get("name", "")).startswith("ProfilerStep#"):
                c["name"] = f"ProfilerStep#{int(str(c['name']).split('#')[1]) + k * len(steps)}"
            out.append(c)
    return out


@dataclass
class _Timeline:
    """Per rank: new start/duration of each GPU event and the delay of each step's host events."""

    gpu_ts: np.ndarray
    gpu_dur: np.ndarray
    step_base: np.ndarray
    """[rank, step]: delay of that step's host events; one extra column: the delay after the last step"""
    span_base: np.ndarray
    """[rank, step]: delay of that step's ProfilerStep start (before its host stall); one extra column"""


def _launch_steps(events: list[dict[str, Any]], gpu: list[int], steps: list[dict[str, Any]]) -> list[int]:
    """Step index of each GPU event, from the time its launch ran on the host (-1 before the first step)."""
    launch: dict[int, float] = {}
    for e in events:
        if e.get("ph") == "X" and not _is_gpu(e) and isinstance(e.get("args"), dict):
            corr = e["args"].get("correlation")
            if isinstance(corr, int) and corr >= 0:
                launch[corr] = e["ts"]
    starts = [s["ts"] for s in steps]
    out = []
    for i in gpu:
        args = events[i].get("args") or {}
        t = launch.get(args.get("correlation", -1), events[i]["ts"])
        k = int(np.searchsorted(starts, t, side="right")) - 1
        out.append(min(k, len(steps) - 1))
    return out


def _sync_points(events: list[dict[str, Any]], gpu: list[int], step_of: list[int]) -> set[int]:
    """Collective kernels whose result the next compute waits for: every one but the all-reduces that overlap
    the backward pass (gradient buckets); the last collective of each step is always waited for."""
    last: dict[int, int] = {}
    out: set[int] = set()
    for j, i in enumerate(gpu):
        name = str(events[i].get("name", ""))
        if name.startswith("nccl"):
            last[step_of[j]] = j
            if "AllReduce" not in name:
                out.add(j)
    return out | set(last.values())


def simulate(job: GpuJob, events: list[dict[str, Any]]) -> _Timeline:
    steps = _steps(events)
    gpu = sorted((i for i, e in enumerate(events) if e.get("ph") == "X" and _is_gpu(e)), key=lambda i: events[i]["ts"])
    step_of = _launch_steps(events, gpu, steps)
    rng = np.random.default_rng(job.seed)
    n, s = job.world, max(len(steps), 1)
    sigma = job.jitter
    device = np.exp(rng.normal(0.0, sigma / 2, n))
    per_step = np.exp(rng.normal(0.0, sigma, (n, s)))
    scale = np.asarray([job.scale.get(r, 1.0) for r in range(n)]) * device
    stall = np.asarray([job.host_stall_us.get(r, 0.0) for r in range(n)])
    copies = np.asarray([job.copy_scale.get(r, 1.0) for r in range(n)])
    host_noise = np.abs(rng.normal(0.0, sigma * 200.0, (n, s)))  # µs of OS noise before each step's launches
    comp = np.zeros(n)
    comm = np.zeros(n)
    base = np.zeros((n, s + 1))
    span = np.zeros((n, s + 1))
    gpu_ts = np.zeros((n, len(gpu)))
    gpu_dur = np.zeros((n, len(gpu)))
    syncs = _sync_points(events, gpu, step_of)
    current = -1
    for j, i in enumerate(gpu):
        k = step_of[j]
        while current < k:
            current += 1
            ready = np.maximum(comp, comm)
            stalled = stall if current % job.stall_every == 0 else 0.0
            start = ready + (stalled + host_noise[:, current] if current >= 0 else 0.0)
            base[:, max(current, 0)] = start
            span[:, max(current, 0)] = ready
            comp = start.copy()
            comm = start.copy()
        e = events[i]
        ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        if str(e.get("name", "")).startswith("nccl"):
            arrive = ts + np.maximum(comm, comp)
            end = float(arrive.max()) + dur
            gpu_ts[:, j] = arrive
            gpu_dur[:, j] = end - arrive
            comm = np.full(n, end - (ts + dur))
            if j in syncs:
                comp = np.maximum(comp, comm)  # the work after it needs its result
            continue
        factor = scale * per_step[:, max(k, 0)] * np.exp(rng.normal(0.0, sigma, n))
        if e.get("cat") != "kernel":
            factor = factor * copies
        new_dur = dur * factor
        gpu_ts[:, j] = ts + comp
        gpu_dur[:, j] = new_dur
        comp = comp + (new_dur - dur)
    while current < s - 1:
        current += 1
        base[:, current] = np.maximum(comp, comm)
        span[:, current] = base[:, current]
        comp = base[:, current].copy()
        comm = base[:, current].copy()
    base[:, s] = np.maximum(comp, comm)
    span[:, s] = base[:, s]
    return _Timeline(gpu_ts, gpu_dur, base, span)


def _retime_rank(
    job: GpuJob, rank: int, events: list[dict[str, Any]], tl: _Timeline, *, gpu: list[int], meta: dict[str, Any]
) -> dict[str, Any]:
    steps = _steps(events)
    starts = [e["ts"] for e in steps]
    index = {i: j for j, i in enumerate(gpu)}
    out = []
    for i, e in enumerate(events):
        if e.get("ph") in FLOW_PHASES:
            continue
        c = dict(e)
        if e.get("ph") == "X" and i in index:
            j = index[i]
            c["ts"], c["dur"] = float(tl.gpu_ts[rank, j]), float(tl.gpu_dur[rank, j])
        elif "ts" in e and isinstance(e.get("ts"), int | float):
            k = max(int(np.searchsorted(starts, e["ts"], side="right")) - 1, 0)
            c["ts"] = float(e["ts"] + tl.step_base[rank, k])
            if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation":
                c["ts"] = float(e["ts"] + tl.span_base[rank, k])  # the step begins, then its host stall
                c["dur"] = float(e["dur"] + tl.span_base[rank, k + 1] - tl.span_base[rank, k])
        out.append(c)
    doc = {k: v for k, v in meta.items() if k != "traceEvents"}
    info = dict(doc.get("distributedInfo") or {})
    info.update({"rank": rank, "world_size": job.world})
    if isinstance(info.get("pg_config"), list):
        info["pg_config"] = [{**pg, "pg_size": job.world, "ranks": list(range(job.world))} for pg in info["pg_config"]]
    doc["distributedInfo"] = info
    doc["traceEvents"] = out
    return doc


def write_job(job: GpuJob, out: Path) -> Path:
    """Write the job's per-rank traces and truth.json into `out`."""
    doc = _load(Path(job.source))
    kept = [e for e in doc["traceEvents"] if e.get("ph") not in FLOW_PHASES and e.get("cat") not in DROPPED_CATS]
    events = repeat_steps(kept, job.repeat)
    tl = simulate(job, events)
    gpu = sorted((i for i, e in enumerate(events) if e.get("ph") == "X" and _is_gpu(e)), key=lambda i: events[i]["ts"])
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(job.world):
        data = orjson.dumps(_retime_rank(job, rank, events, tl, gpu=gpu, meta=doc))
        (out / f"rank{rank}.pt.trace.json.gz").write_bytes(gzip.compress(data, compresslevel=3))
    truth = {"job": job.__dict__, **job.truth()}
    (out / "truth.json").write_text(json.dumps(truth, indent=1, default=str))
    return out


def step_time_us(source: Path) -> float:
    """Median recorded step of a source trace (to size faults as a share of the step)."""
    steps = _steps(_load(source)["traceEvents"])
    durs = sorted(float(e["dur"]) for e in steps)
    return durs[len(durs) // 2] if durs else math.nan


__all__ = ["GpuJob", "repeat_steps", "simulate", "step_time_us", "write_job"]
