"""A multi-rank job, analysed whole: `stepscope analyze` (worker processes on every usable CPU) vs HTA, in one run.

The job is N copies of one trace (--trace; by default HTA's nccl_2rank_rank1_large, 54 MB of JSON, from the HTA test
traces in ../shared/data/traces/hta beside the checkout) with distributedInfo.rank set to 0..N-1, written once into
.bench-cache/ranks-<N>/. Each side runs in a fresh subprocess:
- hta:  TraceAnalysis(trace_dir) (HTA parses the ranks in a process pool of its own) + temporal breakdown, kernel
        breakdown, comm/comp overlap and idle-time breakdown of every rank;
- ours: `stepscope analyze DIR -o OUT` with the default worker count (the CPUs the process may use), and with
        STEPSCOPE_ANALYZER_WORKERS=1 (one process) for the scaling figure.
Peak RSS is that of the largest process of each side: for HTA ru_maxrss over the process and every descendant it
waited for (its pool), for ours the same and the RSS of every descendant sampled every 10 ms, in a run of its own:
the sampling takes CPU from the command, so its time comes from another run with nothing beside it (HTA's ru_maxrss
costs nothing). Times: HTA's from TraceAnalysis to its last breakdown (its imports, 0.7 s of pandas and friends,
timed apart); ours the whole `stepscope analyze` command, imports and report included. The bar is judged on HTA's
analysis alone (the stricter ratio); the ratio with both sides' imports is printed beside it.
The sides run interleaved, --repeat times each; the median run of each side counts. Our command's time is split by
the phases it reports (STEPSCOPE_PHASES, stepscope_analyzer/phases.py): interpreter start and imports, pool start
(from the command's own imports to the first rank begun in a worker: finding the traces, the pipeline's and the
workers' imports, the fork), rank
work (to the last rank's result), diagnosis (reduce), report (report.json and report.html) and exit.
Prints wall-time and memory ratios against the bars (>= 20x HTA, <= 0.2 of its largest process), the split, the
1-minute load average, and whether every rank's temporal breakdown agrees within 1%.

    python bench/ranks_vs_hta.py [--ranks 8] [--repeat 3] [--trace TRACE.json.gz]
Needs the bench dependency group (make bench-deps).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "traces" / "hta" / "nccl_2rank_rank1_large.json.gz"
PHASES = ("imports", "pool start", "rank work", "diagnosis", "report", "exit")
CACHE = ROOT / ".bench-cache"
KEYS = ("idle_time", "compute_time", "non_compute_time", "kernel_time")


def _peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0


def job_folder(ranks: int, trace: Path) -> Path:
    folder = CACHE / f"ranks-{ranks}-{trace.name.split('.')[0]}"
    if len(list(folder.glob("rank*.pt.trace.json.gz"))) == ranks:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    for rank in range(ranks):
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": rank, "world_size": ranks}
        data = json.dumps(doc).encode()
        (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(gzip.compress(data, compresslevel=6))
    return folder


def side_hta(folder: Path) -> dict[str, Any]:
    import logging

    t_import = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)
    t0 = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=str(folder))
    temporal = analysis.get_temporal_breakdown(visualize=False)
    analysis.get_gpu_kernel_breakdown(
        visualize=False, num_kernels=10**9, duration_ratio=1.0, include_memory_kernels=True
    )
    analysis.get_comm_comp_overlap(visualize=False)
    analysis.get_idle_time_breakdown(ranks=[int(r) for r in temporal["rank"]], visualize=False)
    seconds = time.perf_counter() - t0
    ranks = {
        int(row["rank"]): {
            "idle_time": float(row["idle_time(us)"]),
            "compute_time": float(row["compute_time(us)"]),
            "non_compute_time": float(row["non_compute_time(us)"]),
            "kernel_time": float(row["kernel_time(us)"]),
        }
        for _, row in temporal.iterrows()
    }
    return {"seconds": seconds, "import_s": t0 - t_import, "peak_rss_mb": _peak_mb(), "ranks": ranks}


def _largest_process_mb(proc: subprocess.Popen[bytes]) -> float:
    """Sample the RSS of `proc` and every descendant (the worker processes) until it exits; the largest, MiB."""
    import psutil

    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            for p in [root, *root.children(recursive=True)]:
                peak = max(peak, p.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.01)
    return peak / 2**20


def _analyze(folder: Path, out: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "stepscope"), "analyze", str(folder), "-o", out],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "STEPSCOPE_PHASES": "1"},
    )  # fmt: skip


def split(stderr: str, began: float, ended: float) -> dict[str, float]:
    """The command's time by phase, from the stamps it printed (the machine's monotonic clock, as this process's)."""
    line = next((x for x in stderr.splitlines() if x.startswith("phases: ")), None)
    if line is None:
        return {}
    t = json.loads(line[len("phases: ") :])
    first = t.get("first rank began", t["ranks began"])
    return {
        "imports": t["imported"] - began,
        "pool start": first - t["imported"],
        "rank work": t["ranks done"] - first,
        "diagnosis": t["diagnosed"] - t["ranks done"],
        "report": t["report written"] - t["diagnosed"],
        "exit": ended - t["report written"],
    }


def side_ours(folder: Path) -> dict[str, Any]:
    """Two runs: one timed, with nothing else running (sampling every process's RSS every 10 ms took ~0.2 s of a
    CPU from the command's two), and one sampled for the largest process, whose time is not used."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        proc = _analyze(folder, out)
        _, err = proc.communicate()
        ended = time.perf_counter()
        if proc.returncode != 0:
            raise RuntimeError(f"stepscope analyze failed: {err.decode()[-2000:]}")
        seconds = ended - t0
        phases = split(err.decode(), t0, ended)
        report = json.loads((Path(out) / "report.json").read_text())
    with tempfile.TemporaryDirectory() as out:
        proc = _analyze(folder, out)
        sampled = _largest_process_mb(proc)
        proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError("stepscope analyze failed")
    ranks = {int(r["rank"]): {k: float(r[k]) for k in KEYS} for r in report["ranks"]}
    return {"seconds": seconds, "peak_rss_mb": max(_peak_mb(), sampled), "ranks": ranks, "phases": phases}


SIDES = {"hta": side_hta, "ours": side_ours}


def run_once(side: str, folder: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--side", side, str(folder)],
        capture_output=True, text=True, check=False, cwd=ROOT, env={**os.environ, **(env or {})},
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{side} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def disagreements(hta: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    out = []
    for rank, h in hta["ranks"].items():
        o = ours["ranks"].get(rank)
        if o is None:
            out.append(f"rank {rank}: missing in ours")
            continue
        out += [f"rank {rank} {k}: hta {h[k]} ours {o[k]}" for k in KEYS if not math.isclose(h[k], o[k], rel_tol=0.01)]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", nargs="?", type=Path)
    p.add_argument("--side", choices=sorted(SIDES))
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3, help="fresh runs per side, interleaved; the median counts")
    p.add_argument("--trace", type=Path, default=TRACE, help="the trace copied to every rank")
    p.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        print(json.dumps(SIDES[args.side](args.folder)))
        return 0
    if args.prepare:
        job_folder(args.ranks, args.trace)
        return 0
    # written by a child: the sides are children of this process, and Linux hands a parent's peak RSS down
    # through fork + exec, so this process must stay small
    prepare = [sys.executable, __file__, "--prepare", "--ranks", str(args.ranks), "--trace", str(args.trace)]
    subprocess.run(prepare, check=True, cwd=ROOT)
    folder = job_folder(args.ranks, args.trace)
    runs: dict[str, list[dict[str, Any]]] = {"hta": [], "ours": [], "ours-1": []}
    for _ in range(args.repeat):
        runs["hta"].append(run_once("hta", folder))
        runs["ours"].append(run_once("ours", folder))
        runs["ours-1"].append(run_once("ours", folder, {"STEPSCOPE_ANALYZER_WORKERS": "1"}))
    best = {
        k: sorted(v, key=lambda r: r["seconds"])[len(v) // 2] | {"peak_rss_mb": max(r["peak_rss_mb"] for r in v)}
        for k, v in runs.items()
    }
    hta, ours, one = best["hta"], best["ours"], best["ours-1"]
    hta_whole = statistics.median(r["seconds"] + r["import_s"] for r in runs["hta"])
    speed, mem = hta["seconds"] / ours["seconds"], ours["peak_rss_mb"] / hta["peak_rss_mb"]
    print(f"{args.ranks} ranks x {args.trace.name}; median of {args.repeat} interleaved; load {os.getloadavg()[0]:.1f}")
    print(f"  HTA      : {hta['seconds']:.2f} s analysis ({hta_whole:.2f} s with its imports), largest process "
          f"{hta['peak_rss_mb']:.0f} MB")  # fmt: skip
    print(f"  ours     : {ours['seconds']:.2f} s, largest process {ours['peak_rss_mb']:.0f} MB (default workers; the "
          "whole command: interpreter start, imports, analysis, report)")  # fmt: skip
    print(f"  ours (1) : {one['seconds']:.2f} s, largest process {one['peak_rss_mb']:.0f} MB (one process)")
    for name in ("hta", "ours"):
        print(f"  runs     : {name} " + ", ".join(f"{r['seconds']:.2f}" for r in runs[name]) + " s, in run order")
    parts = {k: statistics.median(r["phases"].get(k, 0.0) for r in runs["ours"]) for k in PHASES}
    print("  split    : " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()) + " (medians, default workers)")
    print(f"  speed    : {speed:.1f}x HTA's analysis alone (bar >= 20x) {'OK' if speed >= 20 else 'BELOW BAR'}; "
          f"{hta_whole / ours['seconds']:.1f}x with both sides' imports; "
          f"workers vs one process {one['seconds'] / ours['seconds']:.2f}x")  # fmt: skip
    print(f"  memory   : {mem:.2f} of HTA's largest process (bar <= 0.2) {'OK' if mem <= 0.2 else 'ABOVE BAR'}")
    problems = disagreements(hta, ours)
    print(f"  agree    : {problems[:3] or 'yes (every rank: idle, compute, non-compute, kernel time within 1%)'}")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
