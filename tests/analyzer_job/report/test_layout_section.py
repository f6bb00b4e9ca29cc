"""The report's parallel layout section: the layout in words, the findings with their gain and remedy, and a
stage x replica grid of compute per step where the slow cell stands out; absent for a data-parallel job. Without a
slow rank the status summary's cause is the top finding's."""

from __future__ import annotations

import re

import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.report import build_report, html_bytes
from stepscope_contract.report import Cause, RankReport, Report
from stepscope_testing.pipeline_summaries import PipeShape, pipeline_job
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


def _html(ranks: list[RankReport]) -> tuple[Report, str]:
    report = build_report(ranks, diagnose(ranks))
    return report, html_bytes(report).decode()


def test_the_grid_shows_every_stage_and_replica_and_the_slow_cell() -> None:
    report, html = _html(pipeline_job(PipeShape(pp=4, dp=2, rank_scale={5: 1.6})))
    assert report.diagnosis.slow_ranks[0].rank == 5
    section = html[html.index('id="parallel-layout"') : html.index('id="ranks"')]
    assert "8 ranks = 4 stages x 2 replicas, from process groups; 4 microbatches per step" in section
    grid = section[section.index('id="layout-grid"') : section.index("</table>", section.index('id="layout-grid"'))]
    rows = re.findall(r"<tr><td>(\d)</td>", grid)
    assert rows == ["0", "1", "2", "3"] and grid.count("replica ") == 2
    cells = re.findall(r'<td class="num( bad)?" style="[^"]*"><span title="rank (\d+)">', grid)
    assert [int(rank) for _, rank in cells] == list(range(8))
    assert [int(rank) for bad, rank in cells if bad] == [5]
    assert 'id="findings"' in section and "pipeline_bubble" in section
    assert "rank 5 ran like its peers" in section[section.index('id="what-if"') :]


def test_a_data_parallel_job_has_no_layout_section() -> None:
    report, html = _html(synthetic_job(JobShape(world_size=4)))
    assert report.diagnosis.layout is None and 'id="parallel-layout"' not in html


def test_the_status_summary_names_the_top_finding_without_a_slow_rank() -> None:
    report, _ = _html(pipeline_job(PipeShape(pp=4, dp=2, microbatches=8, stage_scale={3: 1.65})))
    summary = build_status_summary(report)
    assert summary.slowest_rank is None and summary.cause == "stage_imbalance"
    assert summary.estimated_speedup == pytest.approx(report.diagnosis.estimated_speedup, rel=1e-3)


def test_a_data_parallel_job_with_a_slow_rank_shows_its_replayed_what_if() -> None:
    slow = synthetic_job(JobShape(world_size=4), slow_rank=2, cause=Cause.COMPUTE, extra_us=30_000.0)
    report, html = _html(slow)
    assert report.diagnosis.layout is None and 'id="parallel-layout"' not in html
    table = html[html.index('id="what-if"') : html.index("</table>", html.index('id="what-if"'))]
    assert "rank 2 ran like its peers" in table
    _, healthy = _html(synthetic_job(JobShape(world_size=4)))
    assert 'id="what-if"' not in healthy


def test_the_step_is_decomposed_by_stage_and_replica() -> None:
    """A heavy last stage: its compute stands out among the stages (report.json and the report's table), while
    the replicas, which all hold one of each stage, split the step alike."""
    report, html = _html(pipeline_job(PipeShape(pp=4, dp=2, microbatches=8, stage_scale={3: 1.65})))
    layout = report.diagnosis.layout
    assert layout is not None
    assert [g.group for g in layout.by_stage] == ["stage 0", "stage 1", "stage 2", "stage 3"]
    assert [g.group for g in layout.by_replica] == ["replica 0", "replica 1"]
    heavy = max(layout.by_stage, key=lambda g: g.compute_excess_us)
    assert heavy.group == "stage 3" and heavy.compute_excess_us > 0.4 * (heavy.compute_us - heavy.compute_excess_us)
    assert all(g.compute_excess_us < 0.1 * heavy.compute_excess_us for g in layout.by_stage[:3])
    for g in layout.by_stage + layout.by_replica:
        assert g.compute_us + g.waiting_us + g.host_us == pytest.approx(g.step_us, rel=0.05)
    a, b = layout.by_replica
    assert a.compute_us == pytest.approx(b.compute_us, rel=0.1) and a.compute_excess_us < 0.1 * a.compute_us
    table = html[html.index('id="group-times"') : html.index("</table>", html.index('id="group-times"'))]
    slow_rows = re.findall(r'<tr class="slow"><td>([^<]+)</td>', table)
    assert slow_rows == ["stage 3"]
