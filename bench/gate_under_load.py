"""The regression gate on a busy runner: same-code pairs and added work recorded while a CPU hog runs on the second
core, and whether the change is named first.

Each round is one real gloo training (tests/analyzer_job/diff/gate_job.py, 2 ranks on CPU, --steps recorded steps
per recording) that records, one after the other: an identical run, the baseline, and candidates with added work
(matmul+tanh rounds per step in a record_function "added_work") planting each of --sizes % (10, 25, 50) into the
candidate's step; the rounds per size are calibrated once, under the same load, before the rounds. During every
recording a busy loop pinned to the last CPU competes with the ranks (plus whatever else the machine runs). The
gate's core (the function `stepscope diff` runs) then compares at --max-regression (15):
- baseline / identical: a pass is right (a regression there is a false failure);
- baseline / candidate +N%: a regression is right from +25% up; the added ops (the "added_work" region, aten::tanh,
  aten::matmul: names the baseline does not have) must be among the first three changes;
- the +25% candidate as the baseline / the baseline as the candidate (an improvement): a pass or "improved" is right.
Recordings are kept under --cache (default .bench-cache/gate-load, ignored by git) and reused on a rerun with the
same settings, so a rerun re-decides without re-recording.

Usage: python bench/gate_accuracy.py load [--pairs 20] [--steps 30] [--sizes 10,25,50] [--max-regression 15]
                                       [--no-hog] [--cache DIR]
Exit 0 when: 0 false failures, +25% and more caught every time, the added ops among the first three changes every
time, and every improvement passes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stepscope_analyzer.diff import DiffConfig, diff_reports, load_side
from stepscope_contract.diff import ChangeKind, DiffResult, DiffVerdict
from stepscope_contract.report import Report

ROOT = Path(__file__).resolve().parent.parent
GATE_JOB = ROOT / "tests" / "analyzer_job" / "diff" / "gate_job.py"
ADDED = frozenset({"added_work", "aten::tanh", "aten::matmul"})
"""what the planted work adds that the baseline has not (aten::mm is in the baseline's backward already)"""
PROBE_ROUNDS = 10
CAUGHT_FROM = 25.0


@contextmanager
def cpu_hog(enabled: bool) -> Iterator[None]:
    """A busy loop pinned to the last CPU for the duration (none with enabled=False)."""
    if not enabled:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(hog.pid, {cpus[-1]})
        yield
    finally:
        hog.kill()
        hog.wait()


def record(specs: list[tuple[Path, int]], steps: int, hog: bool) -> None:
    """Record each (folder, rounds) in one training job, unless every folder is there from an earlier run."""
    if all((p / "traces").is_dir() for p, _ in specs):
        return
    cmd = [sys.executable, str(GATE_JOB), *(f"{p}:{n}" for p, n in specs), "--steps", str(steps)]
    with cpu_hog(hog):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)


def planted(d: DiffResult) -> float:
    """The added region's inclusive time over the rest of the candidate's median step, in %."""
    added = next((c for c in d.top_changes if c.name == "added_work" and c.change is ChangeKind.ADDED), None)
    if added is None:
        return 0.0
    rest = d.candidate.median_step_us - added.candidate_us_per_step
    return 100.0 * added.candidate_us_per_step / rest if rest > 0 else 0.0


def calibrate(cache: Path, args: argparse.Namespace) -> dict[float, int]:
    base, probe = cache / "calibrate-base", cache / "calibrate-probe"
    record([(base, 0), (probe, PROBE_ROUNDS)], args.steps, args.hog)
    got = planted(diff_reports(load_side(str(base)), load_side(str(probe)), DiffConfig()))
    rounds = {size: max(1, round(PROBE_ROUNDS * size / got)) if got > 0 else PROBE_ROUNDS for size in args.sizes}
    print(
        f"calibration: {PROBE_ROUNDS} rounds planted {got:.1f}%: "
        + ", ".join(f"+{s:g}% {n} rounds" for s, n in rounds.items())
    )
    return rounds


@dataclass
class Round:
    same: DiffResult
    slow: dict[float, DiffResult]
    better: DiffResult


def named_first(d: DiffResult) -> bool:
    return any(c.name in ADDED and c.change is ChangeKind.ADDED for c in d.top_changes[:3])


def cell(d: DiffResult) -> str:
    low, high = d.regression_ci_low_pct or 0.0, d.regression_ci_high_pct or 0.0
    steps = f"steps {d.regression_pct or 0:+6.1f}% [{low:+6.1f}, {high:+6.1f}]"
    w = d.added_work
    work = (
        f"added {w.pct:5.1f}% [{w.ci_low_pct or 0:5.1f}, {w.ci_high_pct or 0:5.1f}]" if w else f"{'added   none':<28}"
    )
    return f"measured {d.step_regression_pct or 0:+6.1f}%  {steps} {work} {d.verdict.value}"


def one_round(i: int, cache: Path, rounds: dict[float, int], args: argparse.Namespace) -> Round:
    folder = cache / f"{i:02d}"
    same, base = folder / "same", folder / "base"
    slows = {size: folder / f"slow{size:g}" for size in args.sizes}
    record([(same, 0), (base, 0), *((slows[s], rounds[s]) for s in args.sizes)], args.steps, args.hog)
    cfg = DiffConfig(max_regression_pct=args.max_regression)
    b = load_side(str(base))
    sides: dict[float, Report] = {s: load_side(str(p)) for s, p in slows.items()}
    mid = min(args.sizes, key=lambda s: abs(s - CAUGHT_FROM))
    return Round(
        same=diff_reports(b, load_side(str(same)), cfg),
        slow={s: diff_reports(b, side, cfg) for s, side in sides.items()},
        better=diff_reports(sides[mid], b, cfg),
    )


def summarize(rounds: list[Round], args: argparse.Namespace) -> bool:
    n = len(rounds)
    false_failures = sum(r.same.verdict is DiffVerdict.REGRESSED for r in rounds)
    drift = [abs(r.same.step_regression_pct or 0.0) for r in rounds]
    hog = "on" if args.hog else "off"
    print(f"\n{n} rounds, gate {args.max_regression:g}%, {args.steps} steps per recording, CPU hog {hog}")
    print(f"  same code: false failures {false_failures}/{n} (bar: 0)")
    print(f"    measured steps moved by: median {statistics.median(drift):.1f}%, largest {max(drift):.1f}%")
    ok = false_failures == 0
    for size in args.sizes:
        ds = [r.slow[size] for r in rounds]
        caught = sum(d.verdict is DiffVerdict.REGRESSED for d in ds)
        first = sum(named_first(d) for d in ds)
        plant = statistics.median(planted(d) for d in ds)
        bar = "all" if size >= CAUGHT_FROM else "-"
        print(f"  +{size:g}% (the added region's median share {plant:.1f}%): caught {caught}/{n} (bar: {bar})")
        print(f"    added ops among the first three changes {first}/{n} (bar: all)")
        ok &= first == n and (caught == n or size < CAUGHT_FROM)
    better = sum(r.better.verdict in (DiffVerdict.PASSED, DiffVerdict.IMPROVED) for r in rounds)
    mid = min(args.sizes, key=lambda s: abs(s - CAUGHT_FROM))
    print(f"  improvement (the +{mid:g}% run as the baseline): passes {better}/{n} (bar: all)")
    return ok and better == n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--sizes", type=lambda t: [float(x) for x in t.split(",")], default=[10.0, 25.0, 50.0])
    p.add_argument("--max-regression", type=float, default=15.0)
    p.add_argument("--no-hog", dest="hog", action="store_false", help="no busy loop on the last CPU")
    p.add_argument("--cache", type=Path, default=ROOT / ".bench-cache" / "gate-load")
    args = p.parse_args(argv)
    cache = args.cache / f"steps{args.steps}-{'hog' if args.hog else 'quiet'}"
    cache.mkdir(parents=True, exist_ok=True)
    print(f"gate under load: {args.pairs} rounds, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    rounds_per_size = calibrate(cache, args)
    rounds = []
    for i in range(args.pairs):
        started = time.perf_counter()
        r = one_round(i, cache, rounds_per_size, args)
        rounds.append(r)
        seconds = time.perf_counter() - started
        print(f"{i:>2} load {os.getloadavg()[0]:4.1f} {seconds:5.1f} s  improvement: {r.better.verdict.value}")
        print(f"     same  {cell(r.same)}")
        for size, d in r.slow.items():
            print(f"     +{size:<3g}  {cell(d)} {'named' if named_first(d) else 'NOT NAMED'}", flush=True)
    ok = summarize(rounds, args)
    print(f"\n{'bars met' if ok else 'bars NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
