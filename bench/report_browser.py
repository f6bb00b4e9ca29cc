"""report.html of 8-rank sessions: its size and how long headless Chromium takes to load and lay it out, against
the bars (under 2 MB, under 2 s). Sessions: the 8-rank GPU scenario of the tests (a real HTA trace per rank, one
GPU throttled, NVML samples), and, when the shared corpus is there, 8 ranks of its 35 MB 8-rank NCCL trace.

    .venv/bin/python bench/report_browser.py [--runs 5]

Load and layout are measured inside Chromium (a probe page loads the report in an iframe, then forces layout); the
whole headless run, browser start included, is printed beside it. Exit 1 when a bar is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_analyzer.report import html_bytes, model_json_bytes, with_trace_links

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "analyzer_job"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "analyzer_job" / "report"))

from browser_probe import ensure_chromium, probe
from gpu_scenario import Scenario, build_session

SIZE_BAR = 2_000_000
TIME_BAR_MS = 2_000.0
SHARED_TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces" / "hta" / "nccl_8rank_rank3.json.gz"


def render(session: Path) -> tuple[Path, int, float]:
    started = time.perf_counter()
    layout = discover(LocalStore(), location_of(str(session)))
    report = reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=True)
    out = session / "report"
    report = with_trace_links(report, location_of(str(out)))
    out.mkdir(exist_ok=True)
    page = out / "report.html"
    page.write_bytes(html_bytes(report))
    (out / "report.json").write_bytes(model_json_bytes(report))
    return page, len(model_json_bytes(report)), time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--big-trace", type=Path, default=SHARED_TRACE, help="the shared corpus's nccl_8rank_rank3.json.gz")
    args = p.parse_args()
    chromium, why = ensure_chromium()
    if chromium is None:
        print(f"skipped: {why}")
        return 0
    scenarios = [("8-rank GPU scenario (HTA nccl trace, throttled rank)", Scenario(world_size=8, throttled=5))]
    if args.big_trace.exists():
        big = Scenario(world_size=8, throttled=3, trace=args.big_trace)
        scenarios.append(("8 ranks of the 35 MB HTA 8-rank trace", big))
    else:
        print(f"(no {args.big_trace}: only the test scenario is measured)")
    missed = False
    with tempfile.TemporaryDirectory(prefix="stepscope-bench-") as tmp:
        for i, (name, sc) in enumerate(scenarios):
            session = build_session(Path(tmp) / f"s{i}", sc)
            page, json_size, analysis = render(session)
            size = page.stat().st_size
            seen = [probe(chromium, page) for _ in range(args.runs)]
            layout = statistics.median(s["layoutMs"] for s in seen)
            loaded = statistics.median(s["loadedMs"] for s in seen)
            wall = statistics.median(s["wallSeconds"] for s in seen)
            ok = size < SIZE_BAR and layout < TIME_BAR_MS
            missed |= not ok
            print(f"{name}: report.html {size / 1e6:.3f} MB ({size / SIZE_BAR:.2f}x the 2 MB bar), report.json "
                  f"{json_size / 1e6:.3f} MB, {seen[0]['elements']} elements; Chromium load {loaded:.0f} ms, "
                  f"load+layout {layout:.0f} ms ({layout / TIME_BAR_MS:.3f}x the 2 s bar), headless run with "
                  f"browser start {wall:.2f} s; analysis {analysis:.1f} s; {'ok' if ok else 'MISSED'}")  # fmt: skip
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
