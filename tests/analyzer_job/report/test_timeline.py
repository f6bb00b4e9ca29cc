"""The timeline of the slowest step: each rank's phases in time order from its trace (contiguous, the whole step,
bounded), collectives and user regions named, one row per rank aligned on the collectives' end; a 64-rank job
drawn in at most MAX_ROWS rows with the slow rank on its own; the report keeps one step's spans only."""

from __future__ import annotations

import itertools
import statistics
import sys
from pathlib import Path

import pytest

from stepscope_analyzer.analyses import summarize_trace
from stepscope_analyzer.analyses.step_spans import MAX_SPANS
from stepscope_analyzer.report.timeline import MAX_ROWS, job_timeline, timeline_chart
from stepscope_contract.ranks import parse_rank_set
from stepscope_contract.report import PhaseSpan

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_demo_sessions import SESSIONS, analyse

pytestmark = pytest.mark.unit


def test_each_step_is_its_phases_in_time_order() -> None:
    r = summarize_trace(SESSIONS / "compute" / "traces" / "rank2.pt.trace.json.gz")
    assert len(r.step_spans) == r.steps.count
    for spans, step in zip(r.step_spans, r.steps.durations_us, strict=True):
        assert 1 <= len(spans) <= MAX_SPANS
        assert spans[0].start_us == 0 and spans[-1].end_us == pytest.approx(step, abs=0.2)
        assert all(a.end_us == b.start_us and a.phase != b.phase for a, b in itertools.pairwise(spans))
        (extra,) = [s for s in spans if s.label == "extra_compute"]  # the planted matmuls, named by their region
        assert extra.phase == "other" and extra.end_us - extra.start_us > 0.4 * step
        waits = [s for s in spans if s.phase == "communication_wait"]
        assert waits and {s.label for s in waits} == {"gloo:all_reduce"}


def test_the_report_draws_the_slowest_step_of_every_rank() -> None:
    report = analyse("compute")
    tl = report.timeline
    assert tl is not None and tl.ranks_total == 4 and [row.rank for row in tl.rows] == [0, 1, 2, 3]
    medians = [statistics.median(r.steps.durations_us[i] for r in report.ranks) for i in range(5)]
    assert tl.step_index == medians.index(max(medians))  # the slowest step
    assert tl.step_number == report.ranks[0].steps.numbers[tl.step_index]
    assert all(not r.step_spans for r in report.ranks)  # one step in report.json, not every step of every rank
    chart = timeline_chart(tl, {2})
    names = {label.text for label in chart.labels}
    assert {"rank 0", "rank 2", "collectives end"} <= names
    assert any(t.startswith("gloo:all_reduce") for t in names) and any(t.startswith("extra_compute") for t in names)
    (line,) = [r for r in chart.rects if r.title == "the collective ends on every rank"]  # every row's ends on it
    at = line.x + line.w / 2
    for i in range(len(tl.rows)):
        ends = [r.x + r.w for r in chart.rects if r.y == 4 + i * 16 and "communication wait" in r.title]
        assert max(ends) == pytest.approx(at, abs=1.0)


def test_64_ranks_fit_in_bounded_rows_with_the_slow_rank_alone() -> None:
    base = next(r for r in analyse("compute").ranks if r.rank == 0)
    wait = PhaseSpan(phase="communication_wait", start_us=10_000, end_us=80_000, label="gloo:all_reduce")
    spans = [[PhaseSpan(phase="forward", start_us=0, end_us=10_000), wait]] * 5
    ranks = []
    for k in range(64):
        step = 80_000.0 + 100.0 * k
        steps = base.steps.model_copy(update={"durations_us": [step] * 5, "count": 5})
        ranks.append(base.model_copy(update={"rank": k, "steps": steps, "step_spans": spans}))
    tl = job_timeline(ranks, {37})
    assert tl is not None and len(tl.rows) <= MAX_ROWS and tl.ranks_total == 64
    alone = [row for row in tl.rows if row.rank == 37]
    assert len(alone) == 1 and alone[0].ranks == ""
    covered = sorted(r for row in tl.rows for r in (parse_rank_set(row.ranks) if row.ranks else {row.rank}))
    assert covered == list(range(64))
    chart = timeline_chart(tl, {37})
    assert len(chart.rects) <= MAX_ROWS * MAX_SPANS and chart.height <= 16 * MAX_ROWS + 30
    assert any(label.text.startswith("ranks ") and "(as " in label.text for label in chart.labels)


def test_a_gpu_rank_s_steps_follow_its_gpu() -> None:
    """GPU ranks: the phases inside each step's GPU window, stretched to the step as its phase totals are."""
    trace = SESSIONS.parent / "gpu_jobs" / "gpu-2r-compute" / "ranks" / "1" / "trace.pt.trace.json.gz"
    r = summarize_trace(trace)
    assert r.device == "cuda" and len(r.step_spans) == r.steps.count
    for spans, step, phases in zip(r.step_spans, r.steps.durations_us, r.step_phases, strict=True):
        assert spans[0].start_us == 0 and spans[-1].end_us == pytest.approx(step, rel=1e-3)
        assert all(a.end_us == b.start_us for a, b in itertools.pairwise(spans))
        backward = sum(s.end_us - s.start_us for s in spans if s.phase == "backward")
        assert backward == pytest.approx(phases.backward, abs=0.05 * step)  # the same phase sets, coarsened


def test_the_axis_has_round_ms_ticks_across_the_drawn_time_and_rows_link_to_the_merged_trace() -> None:
    from stepscope_analyzer.report.timeline import tick_step_ms
    from stepscope_contract.merged_trace import MergedTrace

    assert [tick_step_ms(t) for t in (0.9, 7.0, 130.0, 4_000.0)] == [0.2, 2.0, 50.0, 1000.0]
    tl = analyse("compute").timeline
    assert tl is not None
    merged = MergedTrace(ranks=[0, 2], events=10, skew_us=3.0, link="merged/merged.pt.trace.json.gz",
                         row_ts_us={"2": 12_345.0})  # fmt: skip
    chart = timeline_chart(tl, {2}, merged)
    ticks = [label for label in chart.labels if label.anchor in ("middle", "end") and label.text[:1].isdigit()]
    assert ticks[0].text == "0" and ticks[-1].text.endswith(" ms") and len(ticks) >= 4
    across = next(label.text for label in chart.labels if label.text.endswith("ms across"))
    assert float(ticks[-1].text.split()[0].replace(",", "")) <= float(across.split()[0].replace(",", ""))
    rows = {label.text: label for label in chart.labels if label.text.startswith("rank ")}
    assert (
        rows["rank 2"].href == merged.link
        and "process 2" in rows["rank 2"].title
        and "12.345 ms" in rows["rank 2"].title
    )
    assert rows["rank 1"].href == ""  # not in the merged trace
