"""Analyzer vs HTA on the same traces and the same analyses, in one run.

For each trace, each side runs in its own fresh subprocess (so peak RSS is measured fairly):
- hta:  TraceAnalysis(trace_dir) + get_temporal_breakdown + get_gpu_kernel_breakdown(all kernels)
        + get_comm_comp_overlap + get_idle_time_breakdown
- ours: stepscope_analyzer.analyses.summarize_trace (read, gunzip, parse, every per-rank analysis)
- parser: plain orjson.loads vs our parse_bytes on the same decompressed bytes (best of N each), with the native
        fast path (parse/_scan.c) and with the Python path alone
- rank: ISA-L inflating the stored trace alone vs our whole analysis of the rank (summarize_trace), best of N each,
        in one warm process
Prints speed and peak-memory ratios, parser throughput against orjson.loads, the rank's analysis against inflating
it, and whether the results agree (1%).

Usage: python bench/analyzer_vs_hta.py [TRACE.json.gz ...]   (default: the largest shared trace)
Needs the bench dependency group (holistictraceanalysis, psutil).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "traces" / "hta"
DEFAULT_TRACE = SHARED / "nccl_2rank_rank1_large.json.gz"


def _peak_rss_mb() -> float:
    """Peak RSS of this process or of any child it waited for (HTA parses in a multiprocessing pool), MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0  # Linux: KiB


def side_hta(trace: Path) -> dict[str, Any]:
    import logging

    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / trace.name).symlink_to(trace.resolve())
        base = _peak_rss_mb()
        t0 = time.perf_counter()
        analysis = TraceAnalysis(trace_dir=tmp)
        t_load = time.perf_counter() - t0
        temporal = analysis.get_temporal_breakdown(visualize=False)
        _, kernels = analysis.get_gpu_kernel_breakdown(
            visualize=False, num_kernels=10**9, duration_ratio=1.0, include_memory_kernels=True
        )
        overlap = analysis.get_comm_comp_overlap(visualize=False)
        rank = int(temporal["rank"].iloc[0])
        analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)
        seconds = time.perf_counter() - t0
    row = temporal.iloc[0]
    return {
        "seconds": seconds,
        "load_seconds": t_load,
        "peak_rss_mb": _peak_rss_mb(),
        "baseline_rss_mb": base,
        "rank": rank,
        "idle_time": float(row["idle_time(us)"]),
        "compute_time": float(row["compute_time(us)"]),
        "non_compute_time": float(row["non_compute_time(us)"]),
        "kernel_time": float(row["kernel_time(us)"]),
        "overlap": float(overlap["comp_comm_overlap_pctg"].iloc[0]),
        "kernels": {f"{r['kernel_type']}|{r['name']}": float(r["sum (us)"]) for _, r in kernels.iterrows()},
    }


def side_ours(trace: Path) -> dict[str, Any]:
    from stepscope_analyzer.analyses import summarize_trace

    base = _peak_rss_mb()
    t0 = time.perf_counter()
    report = summarize_trace(trace, top_n=10**9)
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "peak_rss_mb": _peak_rss_mb(),
        "baseline_rss_mb": base,
        "rank": report.rank,
        "idle_time": report.idle_time,
        "compute_time": report.compute_time,
        "non_compute_time": report.non_compute_time,
        "kernel_time": report.kernel_time,
        "overlap": report.comp_comm_overlap_pctg if report.communication_time > 0 else float("nan"),
        "kernels": {f"{k.kernel_type}|{k.name}": k.sum_us for k in report.top_kernels},
    }


def side_parser(trace: Path, repeats: int = 5) -> dict[str, Any]:
    import orjson

    from stepscope_analyzer.parse import native, parse_bytes, read_trace_bytes

    data = read_trace_bytes(trace)

    def best(fn: Any) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = fn(data)
            times.append(time.perf_counter() - t0)
            del result
        return min(times)

    t_orjson = best(orjson.loads)
    t_ours = best(parse_bytes)
    with native.enabled(False):
        t_python = best(parse_bytes)
    return {"bytes": len(data), "orjson_seconds": t_orjson, "parse_seconds": t_ours, "python_seconds": t_python,
            "native": native.AVAILABLE}  # fmt: skip


def side_rank(trace: Path, repeats: int = 5) -> dict[str, Any]:
    from isal import isal_zlib

    from stepscope_analyzer.analyses import summarize_trace

    raw = trace.read_bytes()

    def best(fn: Any) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    return {
        "inflate_seconds": best(lambda: isal_zlib.decompress(raw, 31)),
        "rank_seconds": best(lambda: summarize_trace(trace, top_n=10**9)),
    }


SIDES = {"hta": side_hta, "ours": side_ours, "parser": side_parser, "rank": side_rank}


def run_sides(sides: list[str], trace: Path, repeat: int) -> dict[str, dict[str, Any]]:
    """Run every side ``repeat`` times, interleaved (so both see the same machine load), each in a fresh process.

    Keeps each side's fastest run, with the highest peak RSS any of its runs reached.
    """
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for _ in range(repeat):
        for side in sides:
            runs[side].append(_run_once(side, trace))
    out = {}
    for side, results in runs.items():
        best = min(results, key=lambda r: r.get("seconds", r.get("parse_seconds", r.get("rank_seconds", 0.0))))
        best["peak_rss_mb"] = max(r.get("peak_rss_mb", 0.0) for r in results)
        out[side] = best
    return out


def _run_once(side: str, trace: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--side", side, str(trace)], capture_output=True, text=True, check=False, cwd=ROOT
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{side} side failed on {trace.name}:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def agree(hta: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    problems = []
    for key in ("idle_time", "compute_time", "non_compute_time", "kernel_time"):
        if not math.isclose(hta[key], ours[key], rel_tol=0.01, abs_tol=0.01):
            problems.append(f"{key}: hta {hta[key]} ours {ours[key]}")
    if not (math.isnan(hta["overlap"]) and math.isnan(ours["overlap"])) and not math.isclose(
        hta["overlap"], ours["overlap"], rel_tol=0.01, abs_tol=0.01
    ):
        problems.append(f"overlap: hta {hta['overlap']} ours {ours['overlap']}")
    if set(hta["kernels"]) != set(ours["kernels"]):
        problems.append(f"kernel sets differ: {len(hta['kernels'])} vs {len(ours['kernels'])}")
    else:
        bad = [k for k, v in hta["kernels"].items() if not math.isclose(v, ours["kernels"][k], rel_tol=0.01)]
        if bad:
            problems.append(f"{len(bad)} kernel sums differ, e.g. {bad[0][:80]}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--side", choices=sorted(SIDES))
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per side; fastest time is kept")
    args = parser.parse_args()
    if args.side:
        print(json.dumps(SIDES[args.side](args.traces[0])))
        return 0
    traces = args.traces or [DEFAULT_TRACE]
    ok = True
    for trace in traces:
        if not trace.exists():
            print(f"missing trace: {trace}")
            return 2
        sides = run_sides(["hta", "ours", "parser", "rank"], trace, args.repeat)
        hta, ours, prs, rank = sides["hta"], sides["ours"], sides["parser"], sides["rank"]
        problems = agree(hta, ours)
        speed = hta["seconds"] / ours["seconds"]
        mem = ours["peak_rss_mb"] / hta["peak_rss_mb"]
        mem_delta = (ours["peak_rss_mb"] - ours["baseline_rss_mb"]) / max(
            1e-9, hta["peak_rss_mb"] - hta["baseline_rss_mb"]
        )
        throughput = prs["orjson_seconds"] / prs["parse_seconds"]
        mb = prs["bytes"] / 1e6
        print(f"trace {trace.name} ({mb:.1f} MB JSON), rank {ours['rank']}; ", end="")
        print(f"best of {args.repeat} interleaved fresh processes each")
        print(f"  HTA   : {hta['seconds']:.2f} s (TraceAnalysis load {hta['load_seconds']:.2f} s), ", end="")
        print(f"peak RSS {hta['peak_rss_mb']:.0f} MB")
        print(f"  ours  : {ours['seconds']:.3f} s, peak RSS {ours['peak_rss_mb']:.0f} MB")
        print(f"  speed : {speed:.1f}x HTA (bar >= 15x) {'OK' if speed >= 15 else 'BELOW BAR'}")
        print(f"  memory: {mem:.2f} of HTA's peak RSS (bar <= 0.33) {'OK' if mem <= 1 / 3 else 'ABOVE BAR'}; "
              f"growth over interpreter baseline {mem_delta:.2f} of HTA's")  # fmt: skip
        print(f"  parser: {mb / prs['parse_seconds']:.0f} MB/s vs orjson.loads {mb / prs['orjson_seconds']:.0f} MB/s "
              f"= {throughput:.2f} (bar >= 0.50) {'OK' if throughput >= 0.5 else 'BELOW BAR'}")  # fmt: skip
        path = "native fast path" if prs["native"] else "NOT BUILT: Python path"
        print(f"  parser: {path}; Python path alone {mb / prs['python_seconds']:.0f} MB/s "
              f"({prs['python_seconds'] / prs['parse_seconds']:.2f}x the time)")  # fmt: skip
        over = rank["rank_seconds"] / rank["inflate_seconds"]
        verdict = "OK" if over <= 3 else "ABOVE BAR"
        print(f"  rank  : whole analysis {1000 * rank['rank_seconds']:.0f} ms vs ISA-L inflate alone "
              f"{1000 * rank['inflate_seconds']:.0f} ms = {over:.1f}x (bar <= 3x) {verdict}")  # fmt: skip
        print(f"  agree : {problems or 'yes (temporal, overlap, per-kernel sums within 1%)'}")
        ok = ok and not problems and speed >= 15 and mem <= 1 / 3 and throughput >= 0.5 and over <= 3
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
