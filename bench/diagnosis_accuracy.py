"""Diagnosis accuracy on the project's scenario corpus (testing/stepscope_testing/corpus.py).

Each scenario is generated once into the cache folder (real gloo jobs take a while; GPU jobs are derived from the
shared real Kineto traces), then analysed as a user would (`stepscope analyze FOLDER -o OUT`), and its report.json's
diagnosis is scored against the scenario's truth: right when the slow ranks and their causes are exactly the
truth's (none for balanced and uniformly slower jobs), and for pipeline-parallel jobs the findings of the job's shape
(stage imbalance, bubble, data imbalance) exactly the truth's and the layout's stages and replicas the job's. Hang
scenarios are listed with their verdicts; their culprit is the hang diagnosis' to name. The real GPU jobs recorded
with the hook on an H200 (tests/analyzer_job/fixtures/gpu_jobs, see its README; more with `--recorded DIR`) are
scored the same way, as they are. Prints a table
(scenario, truth, right?, the 1-minute load average of the machine when a real job was recorded, verdict) and the
false-alarm rate over the balanced runs.

    python bench/diagnosis_accuracy.py [--cache .corpus] [--only SUBSTRING] [--regenerate]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "testing"))

from stepscope_analyzer.commands.cli import analyze_main  # noqa: E402
from stepscope_testing import corpus as corpus_module  # noqa: E402
from stepscope_testing.corpus import Scenario, corpus  # noqa: E402
from stepscope_testing.gloo_jobs import GlooJob  # noqa: E402

RECORDED = ROOT / "tests" / "analyzer_job" / "fixtures" / "gpu_jobs"


def _pairs(items: list[dict[str, Any]]) -> set[tuple[int, str]]:
    return {(int(s["rank"]), str(s["cause"])) for s in items}


def _shape_right(truth: dict[str, Any], d: dict[str, Any]) -> bool:
    """Pipeline jobs: the findings and the layout are the truth's; other jobs: no findings."""
    found = sorted(str(f["cause"]) for f in d.get("findings", []))
    if "findings" not in truth:
        return not found
    layout = d.get("layout") or {}
    want = truth.get("layout", {})
    same = (layout.get("stages"), layout.get("replicas")) == (want.get("stages"), want.get("replicas"))
    return found == sorted(truth["findings"]) and same


def _text(pairs: set[tuple[int, str]]) -> str:
    return ", ".join(f"{r}:{c}" if r >= 0 else c for r, c in sorted(pairs)) or "none"


def ensure(s: Scenario, cache: Path, regenerate: bool) -> Path:
    folder = cache / s.name
    if regenerate or not (folder / "truth.json").exists():
        started = time.perf_counter()
        print(f"  generating {s.name} ...", file=sys.stderr, flush=True)
        s.generate(folder)
        traces = [f for f in folder.rglob("*.json.gz")]
        if not s.is_hang and len(traces) != s.job.world:
            raise RuntimeError(f"{s.name}: {len(traces)} trace files for {s.job.world} ranks")
        print(f"  generated {s.name} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return folder


def recorded(folders: list[Path]) -> list[tuple[Scenario, Path]]:
    """Jobs recorded elsewhere (a GPU machine): each folder holding a truth.json written by run_job."""
    out = []
    for root in folders:
        for truth in sorted(root.glob("*/truth.json")):
            wire = json.loads(truth.read_text())["job"]
            job = GlooJob(**{**wire, "slow_ranks": tuple(wire["slow_ranks"]), "tokens": tuple(wire["tokens"])})
            out.append((Scenario(truth.parent.name, "recorded", job), truth.parent))
    return out


def analyse(folder: Path, out: Path) -> tuple[int, dict[str, Any]]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = analyze_main([str(folder), "-o", str(out)])
    report: dict[str, Any] = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return code, report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", default=str(ROOT / ".corpus"), help="where generated scenarios are kept")
    p.add_argument("--only", default="", help="only scenarios whose name contains this")
    p.add_argument("--regenerate", action="store_true", help="generate the scenarios again")
    p.add_argument("--generate-only", action="store_true", help="only generate the missing scenarios")
    p.add_argument("--cached-only", action="store_true", help="only score the scenarios already generated")
    p.add_argument("--recorded", action="append", default=[str(RECORDED)], help="folders of recorded jobs to score")
    p.add_argument("--traces", default=str(ROOT.parent / "shared" / "data" / "traces" / "hta"),
                   help="the HTA test traces the GPU scenarios are derived from (full; tests/analyzer_job/fixtures/hta "
                   "holds them cut to their first steps)")  # fmt: skip
    a = p.parse_args(argv)
    corpus_module.HTA_TRACES = Path(a.traces)
    cache = Path(a.cache)
    scenarios = [s for s in corpus() if a.only in s.name]
    if a.cached_only:
        scenarios = [s for s in scenarios if (cache / s.name / "truth.json").exists()]
    rows: list[tuple[Scenario, str, str, bool | None]] = []
    jobs: list[tuple[Scenario, Path | None]] = [(s, None) for s in scenarios]
    jobs += [(s, f) for s, f in recorded([Path(r) for r in a.recorded]) if a.only in s.name]
    for s, kept in jobs:
        folder = kept or ensure(s, cache, a.regenerate)
        if a.generate_only:
            continue
        code, report = analyse(folder, cache / ".reports" / s.name)
        d = report.get("diagnosis", {})
        got = _pairs(d.get("slow_ranks", []))
        want = _pairs(s.truth["slow_ranks"])
        right = None if s.is_hang else got == want and _shape_right(s.truth, d)
        if "findings" in s.truth:
            got |= {(-1, str(f["cause"])) for f in d.get("findings", [])}
            want |= {(-1, f) for f in s.truth["findings"]}
        machine = json.loads((folder / "truth.json").read_text()).get("machine") or {}
        load = f"{machine['load_before']:.1f}" if "load_before" in machine else "-"
        rows.append((s, _text(want), f"{load:>5}  {_text(got)} (exit {code}) {d.get('verdict', '')[:90]}", right))
    if a.generate_only:
        return 0
    width = max((len(s.name) for s, *_ in rows), default=10)
    print(
        f"{'scenario':<{width}}  {'truth':<16}  {'right?':<6}  {'load':>5}  verdict (slow ranks found, exit code, line)"
    )
    for s, truth, verdict, right in rows:
        mark = "hang*" if right is None else ("yes" if right else "NO")
        print(f"{s.name:<{width}}  {truth:<16}  {mark:<6}  {verdict}")
    scored = [r for r in rows if r[3] is not None]
    balanced = [r for r in rows if r[0].balanced]
    false_alarms = [r for r in balanced if not r[3]]
    no_fault = [r for r in rows if r[0].truth.get("kind") in ("balanced", "uniform")]
    fa_all = [r for r in no_fault if not r[3]]
    print(f"\nright: {sum(1 for r in scored if r[3])}/{len(scored)} (hang scenarios listed, not scored: *)")
    print(f"false alarms over balanced runs: {len(false_alarms)}/{len(balanced)}"
          f" ({100.0 * len(false_alarms) / max(len(balanced), 1):.1f}%)")  # fmt: skip
    print(f"false alarms over balanced and uniformly slower runs: {len(fa_all)}/{len(no_fault)}")
    return 0 if all(r[3] for r in scored) else 1


if __name__ == "__main__":
    raise SystemExit(main())
