"""The parts of report.html that explain the step: phase bars per rank and per step of the slow rank (drawn from
ranks[].phases / step_phases, nothing when absent), the gain estimate, the environment block and the way to the
traces. Each is built from RankReports and a Diagnosis carrying those fields."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from stepscope_analyzer.report import build_report, html_bytes, with_trace_links
from stepscope_analyzer.report.environment import environment_rows, gpu_metrics_note
from stepscope_analyzer.report.gain import gain_sentence, step_duration
from stepscope_analyzer.report.phase_charts import PHASE_COLORS, phase_chart, step_phase_chart
from stepscope_analyzer.report.trace_access import trace_access
from stepscope_contract.report import (
    CaptureInfo,
    Cause,
    Diagnosis,
    RankEnvironment,
    RankReport,
    SlowRank,
    StepPhases,
    StepStats,
)
from stepscope_contract.session import CaptureSpec
from stepscope_contract.storage import (
    TRACE_FILE,
    parse_storage_uri,
    rank_artifact_key,
    rank_location,
    report_location,
    session_location,
)

pytestmark = pytest.mark.unit

SESSION = session_location(parse_storage_uri("s3://bucket/profiles"), "ml", "run", "1234abcd")


def _phases(data: float, fwd: float, bwd: float, opt: float = 2_000, wait: float = 1_000) -> StepPhases:
    return StepPhases(data_loading=data, forward=fwd, backward=bwd, optimizer=opt, communication_wait=wait, other=500)


def _rank(r: int, phases: StepPhases | None, per_step: int = 0) -> RankReport:
    steps = [phases] * per_step if phases else []
    return RankReport(
        rank=r,
        steps=StepStats(count=max(per_step, 1), median_us=20_000, mean_us=20_000),
        phases=phases,
        step_phases=steps,
        trace_uri=f"s3://bucket/{rank_location(SESSION, r).key(TRACE_FILE)}",
        node=f"node-{r // 2}",
        pod=f"trainer-{r}",
        environment=RankEnvironment(
            torch_version="2.5.1" if r != 3 else "2.4.0",
            backend="nccl",
            nccl_version="2.21.5",
            device_name="NVIDIA H100 80GB HBM3",
            window_start=datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC),
            window_end=datetime(2025, 3, 1, 12, 0, 1, 500_000, tzinfo=UTC),
            gpu_metrics_status="unavailable: nvidia-ml-py is not installed",
        ),
        device="cuda",
    )


def _slow_job() -> tuple[list[RankReport], Diagnosis]:
    ranks = [_rank(r, _phases(1_000, 5_000, 9_000)) for r in range(4)]
    ranks[2] = _rank(2, _phases(48_000, 5_000, 9_000), per_step=5)
    d = Diagnosis(
        verdict="Rank 2 slows the job: host-side stalls",
        median_step_us=77_000,
        p90_step_us=80_000,
        expected_step_us=16_000,
        estimated_speedup=4.8,
        slow_ranks=[SlowRank(rank=2, cause=Cause.HOST, confidence=0.9)],
    )
    return ranks, d


def test_one_stacked_bar_per_rank_on_one_scale() -> None:
    ranks, _ = _slow_job()
    chart = phase_chart(ranks, {2})
    assert chart is not None
    widths = {r: sum(x.w for x in chart.rects if x.title.startswith(f"rank {r} ")) for r in range(4)}
    assert widths[2] > 3 * widths[0]  # the slow rank's bar is longer, on the same scale
    loading = [x for x in chart.rects if x.title.startswith("rank 2 data loading")]
    assert loading and loading[0].fill == PHASE_COLORS["data_loading"] and loading[0].w == max(x.w for x in chart.rects)
    assert [x.text for x in chart.labels if x.bold] == ["rank 2"]
    assert {x.fill for x in chart.rects} == set(PHASE_COLORS.values())
    steps = step_phase_chart(ranks[2])
    assert steps is not None and [x.text for x in steps.labels if x.text.startswith("step")] == [
        f"step {i}" for i in range(5)
    ]


def test_no_phases_no_bars() -> None:
    ranks = [_rank(r, None) for r in range(3)]
    assert phase_chart(ranks, set()) is None and step_phase_chart(ranks[0]) is None
    d = Diagnosis(verdict="balanced")
    page = html_bytes(build_report(ranks, d)).decode()
    assert 'id="phase-bars"' not in page and 'id="phases"' not in page  # no section without data


def test_the_page_shows_phases_gain_and_the_slow_ranks_steps() -> None:
    ranks, d = _slow_job()
    page = html_bytes(build_report(ranks, d)).decode()
    assert 'id="phase-bars"' in page and 'id="steps-2"' in page
    gain = "If rank 2 matched the others, a step would take ~16 ms instead of 77 ms (4.80x faster)."
    assert gain in page and page.index(gain) < page.index('id="ranks"')  # in the verdict box
    assert "rank 2 data loading: 48.00 ms" in page


def test_gain_falls_back_when_the_estimate_is_absent() -> None:
    _, d = _slow_job()
    assert gain_sentence(d.model_copy(update={"expected_step_us": None, "estimated_speedup": None})) == (
        "A step takes 77 ms (median over ranks and steps, p90 80 ms)."
    )
    assert gain_sentence(Diagnosis(verdict="x")) is None
    two = d.model_copy(update={"slow_ranks": [*d.slow_ranks, SlowRank(rank=5, cause=Cause.COMPUTE, confidence=1)]})
    assert (gain_sentence(two) or "").startswith("If ranks 2,5 matched the others")
    assert [step_duration(x) for x in (850, 7_400, 77_000, 1_240_000)] == ["850 µs", "7.4 ms", "77 ms", "1.24 s"]


def test_environment_lists_versions_devices_capture_and_window() -> None:
    ranks, d = _slow_job()
    spec = CaptureSpec(steps=10, skip_steps=2, record_shapes=True)
    report = build_report(ranks, d).model_copy(update={"capture": CaptureInfo.from_spec(spec)})
    rows = {row.label: row.value for row in environment_rows(report)}
    assert rows["torch"] == "2.5.1 (ranks 0-2), 2.4.0 (ranks 3)"  # the odd rank stands out
    assert rows["backend"] == "nccl 2.21.5" and rows["devices"] == "NVIDIA H100 80GB HBM3"
    assert rows["capture"] == (
        "10 steps after 2 skipped; activities cpu, cuda; record shapes; GPU metrics every 100 ms; step timeout 120 s"
    )
    assert rows["captured"] == "steps 2025-03-01 12:00:00.000 → 12:00:01.500 UTC (1.50 s)"
    assert gpu_metrics_note(ranks) == "No GPU metrics: unavailable: nvidia-ml-py is not installed."
    unknown = {row.label: row.value for row in environment_rows(build_report(ranks, d))}
    assert unknown["capture"].endswith("(the session's spec is not known here)")


def test_each_rank_links_to_its_trace_relative_to_the_report() -> None:
    ranks, d = _slow_job()
    report = with_trace_links(build_report(ranks, d), report_location(SESSION))
    assert [r.trace_link for r in report.ranks] == [f"../ranks/{r}/trace.pt.trace.json.gz" for r in range(4)]
    access = trace_access(report)
    assert access.example == "../ranks/0/trace.pt.trace.json.gz" and access.folder == "traces"
    assert access.gather is not None and "for f in ../ranks/*/trace.pt.trace.json.gz" in access.gather
    page = html_bytes(report).decode()
    assert len(re.findall(r'<a class="trace" href="\.\./ranks/\d/trace\.pt\.trace\.json\.gz"', page)) == 4
    elsewhere = with_trace_links(build_report(ranks, d), parse_storage_uri("file:///tmp/out"))
    assert all(r.trace_link is None for r in elsewhere.ranks) and trace_access(elsewhere).linked == 0
    assert "The traces lie in another store than this page" in html_bytes(elsewhere).decode()


def test_the_sidecars_layout_links_one_folder_hta_and_tensorboard_open() -> None:
    ranks, d = _slow_job()
    flat = [r.model_copy(update={"trace_uri": f"s3://bucket/{rank_artifact_key(SESSION, r.rank, TRACE_FILE)}"})
            for r in ranks]  # fmt: skip
    report = with_trace_links(build_report(flat, d), report_location(SESSION))
    assert [r.trace_link for r in report.ranks] == [f"../traces/rank{r}.pt.trace.json.gz" for r in range(4)]
    access = trace_access(report)
    assert (access.folder, access.logdir, access.gather) == ("../traces", "..", None)
    page = html_bytes(report).decode()
    assert 'TraceAnalysis(trace_dir="../traces")' in page and "tensorboard --logdir .." in page


def test_traces_in_one_folder_need_no_gathering() -> None:
    name = "rank{}.pt.trace.json.gz"
    ranks = [
        RankReport(rank=r, trace_uri=f"file:///data/run/{name.format(r)}", trace_link=f"../run/{name.format(r)}")
        for r in range(2)
    ]
    access = trace_access(build_report(ranks, Diagnosis(verdict="x")))
    assert access.gather is None and access.folder == "../run" and access.logdir == ".."
