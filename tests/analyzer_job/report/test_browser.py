"""report.html of a multi-rank GPU session in a real browser (headless Chromium, offline): the verdict, the phase
bars, the GPU plots and a link to every rank's trace are visible, every link's file exists, the page requests
nothing, and hostile names from the traces and manifests are shown as text without running anything."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_analyzer.report import html_bytes, with_trace_links
from stepscope_analyzer.report.phase_charts import PHASE_COLORS
from stepscope_contract.report import Report, StepPhases

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browser_probe import ensure_chromium, probe
from gpu_scenario import HOSTILE_KERNEL, HOSTILE_NODE, Scenario, build_session

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def chromium() -> str:
    path, why = ensure_chromium()
    if path is None:
        pytest.skip(why)
    return path


def _phases_where_missing(report: Report) -> Report:
    """The analysis computes ranks[].phases; where a summary has none, a split of its own step time is drawn, so the
    page's drawing is checked whatever the analysis computes (data loading grows with the rank's idle share)."""
    ranks = []
    for r in report.ranks:
        if r.phases is not None or r.steps.count == 0:
            ranks.append(r)
            continue
        step = r.steps.mean_us
        idle = r.idle_time_pctg / 100.0
        phases = StepPhases(data_loading=0.3 * idle * step, forward=0.25 * (1 - idle) * step,
                            backward=0.5 * (1 - idle) * step, optimizer=0.1 * (1 - idle) * step,
                            communication_wait=0.5 * idle * step,
                            other=(0.2 * idle + 0.15 * (1 - idle)) * step)  # fmt: skip
        ranks.append(r.model_copy(update={"phases": phases, "step_phases": [phases] * r.steps.count}))
    return report.model_copy(update={"ranks": ranks})


def _render(tmp_path: Path) -> tuple[Path, Report]:
    session = build_session(tmp_path / "session", Scenario(world_size=8, throttled=5, hostile=True))
    layout = discover(LocalStore(), location_of(str(session)))
    report = reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=True)
    out = session / "report"
    report = _phases_where_missing(with_trace_links(report, location_of(str(out))))
    out.mkdir()
    page = out / "report.html"
    page.write_bytes(html_bytes(report))
    return page, report


def test_the_report_reads_in_a_real_browser(tmp_path: Path, chromium: str) -> None:
    page, report = _render(tmp_path)
    seen: dict[str, Any] = probe(chromium, page)
    size = page.stat().st_size / 1e6
    print(f"\nreport.html {size:.2f} MB, {seen['elements']} elements; in Chromium: loaded in {seen['loadedMs']:.0f} ms,"
          f" laid out in {seen['layoutMs']:.0f} ms (probe run {seen['wallSeconds']:.1f} s)")  # fmt: skip
    assert seen["verdictVisible"] and seen["verdict"] == report.diagnosis.verdict
    assert seen["verdict"].startswith("Rank 5 on node " + HOSTILE_NODE)
    assert seen["phaseBars"] >= 8 * 5 and set(seen["phaseColors"]) <= set(PHASE_COLORS.values())
    assert seen["stepViews"] == 1  # the slow rank, step by step
    assert seen["gpuLines"] >= 2 * 8
    links = seen["links"]
    assert [x["href"] for x in links] == [f"../ranks/{r}/trace.pt.trace.json.gz" for r in range(8)]
    assert all(x["visible"] and x["exists"] for x in links), links
    text = seen["text"]
    assert "thermal slowdown active" in text and "Rank 5 against the median of the other ranks" in text
    assert "Opening the traces" in text and "ui.perfetto.dev" in text
    # offline and inert: nothing requested, no script or image made from a name, no handler ran
    assert seen["requested"] == [] and seen["scripts"] == 0 and seen["images"] == 0
    assert seen["ran"] == [None, None]
    assert HOSTILE_NODE in text and HOSTILE_KERNEL in text  # shown as the text they are
