"""One consistent set of numbers, on the real 2-rank gloo pair (rank 1 sleeps 20 ms before its all_reduce, rank 0
waits for it): each figure is defined once and quoted the same in ranks[], the evidence, the communication table,
the verdict and the status summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_contract.report import Cause, Report

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    folder = tmp_path_factory.mktemp("pair")
    for rank in (0, 1):
        data = (FIXTURES / f"gloo_2rank_rank{rank}.pt.trace.json.gz").read_bytes()
        (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(data)
    return reduce_outcomes(summarize_all(LocalStore(), discover(LocalStore(), location_of(str(folder)))))


def test_the_sleeping_rank_is_named_with_host_and_its_place(report: Report) -> None:
    d = report.diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(1, Cause.HOST)]
    slow = d.slow_ranks[0]
    assert slow.phase == "other"
    gap = next(e for e in slow.evidence if e.metric.startswith("host time between"))
    assert "c10d::allreduce_" in gap.metric and gap.value > 15_000 and gap.baseline < 2_000


def test_the_wait_is_one_number_everywhere(report: Report) -> None:
    d = report.diagnosis
    r0 = next(r for r in report.ranks if r.rank == 0)
    r1 = next(r for r in report.ranks if r.rank == 1)
    assert r0.collective_wait_estimated and r1.collective_wait_estimated
    assert r0.collective_wait_time > 15_000 * r0.steps.count > r1.collective_wait_time
    wait = next(e for e in d.slow_ranks[0].evidence if e.metric == "collective wait per step")
    assert wait.baseline == pytest.approx(r0.collective_wait_time / r0.steps.count)  # the other rank's, per step
    shared = sum(c.wait_us for c in r0.collectives)
    assert shared == pytest.approx(r0.collective_wait_time, rel=1e-6)
    table = {c.name: c for c in d.communication}
    per_rank = [sum(c.wait_us for c in r.collectives if c.name == "gloo:all_reduce") for r in (r0, r1)]
    assert table["gloo:all_reduce"].wait_us == pytest.approx(sum(per_rank) / 2, rel=1e-6)


def test_the_slowdown_reads_as_a_user_reads_it(report: Report) -> None:
    d = report.diagnosis
    slow = d.slow_ranks[0]
    assert d.median_step_us > 20_000 and d.p90_step_us >= d.median_step_us
    replayed = next(w for w in d.what_if if w.kind == "like_peers")  # the step with rank 1 like its peer
    assert d.expected_step_us == pytest.approx(replayed.step_us, abs=0.1)
    assert d.expected_step_us == pytest.approx(d.median_step_us - slow.excess_us, rel=0.1)
    assert d.estimated_speedup == pytest.approx(d.median_step_us / d.expected_step_us)
    assert 15_000 < slow.excess_us < 21_000  # the 20 ms sleep, as far as rank 0 waits for it
    summary = build_status_summary(report)
    assert summary.slowest_rank == 1 and summary.cause == "host"
    assert summary.median_step_ms == pytest.approx(d.median_step_us / 1000, abs=1e-3)
    assert summary.p90_step_ms == pytest.approx(d.p90_step_us / 1000, abs=1e-3)
    assert summary.slowdown_percent == slow.slowdown_pct
    assert summary.estimated_speedup == pytest.approx(d.estimated_speedup, abs=1e-3)
    assert f"~{d.estimated_speedup:.2f}x faster" in d.verdict


def test_bottlenecks_are_the_jobs_own_costs(report: Report) -> None:
    """The waiting rank's gloo:all_reduce is mostly waiting: the bottleneck counts the least over the ranks."""
    top = report.diagnosis.bottlenecks
    allreduce = next(b for b in top if b.name == "gloo:all_reduce")
    ratios = [next(f.bottleneck_ratio for f in r.top_functions if f.name == "gloo:all_reduce") for r in report.ranks]
    assert allreduce.bottleneck_ratio == pytest.approx(min(ratios))
    assert allreduce.bottleneck_ratio < 0.5 * max(ratios)
    assert all(b.category not in ("user_annotation", "host_gap") for b in top)


def test_every_per_rank_figure_is_per_step_and_one_value(report: Report) -> None:
    """report.json's ranks[].per_step holds the per-rank table's figures, per step, and the evidence quotes the same
    value: the wait per step in the table, in report.json and in the slow rank's evidence is one number."""
    from stepscope_analyzer.report import html_bytes

    html = html_bytes(report).decode()
    d = report.diagnosis
    r0 = next(r for r in report.ranks if r.rank == 0)
    assert r0.per_step is not None and r0.per_step.steps == r0.steps.count
    assert r0.per_step.waiting_us == pytest.approx(r0.collective_wait_time / r0.steps.count, abs=0.05)
    assert r0.per_step.step_median_us == pytest.approx(r0.steps.median_us, abs=0.05)
    wait = next(e for e in d.slow_ranks[0].evidence if e.metric == "collective wait per step")
    assert wait.baseline == pytest.approx(r0.per_step.waiting_us, abs=0.05)
    table = html[html.index('id="ranks"') : html.index("</table>", html.index('id="ranks"'))]
    row0 = table[table.index('<td class="num">0</td>') :]
    row0 = row0[: row0.index("</tr>")]
    ms = lambda us: f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"  # noqa: E731 - the report's |us
    for figure in (r0.per_step.step_median_us, r0.per_step.waiting_us, r0.per_step.host_us):
        assert ms(figure) in row0, (ms(figure), row0)
