"""The analyzer on the demo's own sessions (fixtures/demo_sessions, see its README): what a user of `make demo` and
its variants reads. Each collective counts once per rank (gloo runs a step's bucket all-reduces concurrently on
two worker threads)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.evidence import cost_evidence
from stepscope_analyzer.diagnosis.rank_costs import rank_samples
from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.diagnosis.straggler_test import Effect
from stepscope_analyzer.diagnosis.what_ran import OPS_LABEL
from stepscope_analyzer.ranks.storage_io import location_of
from stepscope_analyzer.report import html_bytes, with_trace_links
from stepscope_contract.report import Cause, Report
from stepscope_testing.local_analysis import analyse_folder

pytestmark = pytest.mark.unit

SESSIONS = Path(__file__).parent / "fixtures" / "demo_sessions"


@functools.cache
def analyse(mode: str) -> Report:
    return analyse_folder(SESSIONS / mode)


@pytest.mark.parametrize("mode", ["compute", "host"])
def test_a_collective_run_on_two_threads_counts_once(mode: str) -> None:
    report = analyse(mode)
    for r in report.ranks:
        (gloo,) = [c for c in r.collectives if c.name == "gloo:all_reduce"]
        assert gloo.count == 2 * r.steps.count  # DDP's two buckets per step
        assert gloo.total_us <= min(1.01 * r.communication_time, r.window_us)  # never beyond the window
        (top,) = [b for b in r.top_functions if b.name == "gloo:all_reduce"]
        assert top.total_us == pytest.approx(gloo.total_us)
    (table,) = [c for c in report.diagnosis.communication if c.name == "gloo:all_reduce"]
    assert table.total_us <= max(r.window_us for r in report.ranks)


def test_matrix_work_after_backward_is_compute_and_the_advice_names_it() -> None:
    """Defect 1: the compute variant's matmuls run between backward and the optimizer step (phase other): the
    cause follows what ran (tensor ops), not the phase; the advice leads with the top op and its region."""
    d = analyse("compute").diagnosis
    (slow,) = d.slow_ranks
    assert (slow.rank, slow.cause, slow.phase) == (2, Cause.COMPUTE, "other")
    assert "more compute per step than the other ranks" in d.verdict and "host-side" not in d.verdict
    (ops,) = [e for e in slow.evidence if e.metric == OPS_LABEL]
    assert ops.value > 0.8 * slow.excess_us and ops.baseline < 0.05 * ops.value
    advice = d.next_steps[0]
    assert advice.startswith("Rank 2 runs ") and "of aten::matmul per step" in advice
    assert "outside forward/backward/optimizer in extra_compute" in advice and "DataLoader" not in advice


def test_a_sleep_in_the_data_loading_stays_host() -> None:
    d = analyse("host").diagnosis
    (slow,) = d.slow_ranks
    assert (slow.rank, slow.cause, slow.phase) == (2, Cause.HOST, "data_loading")
    assert not [e for e in slow.evidence if e.metric == OPS_LABEL]
    assert d.next_steps[0].startswith("Rank 2 spends ") and "of load_batch per step" in d.next_steps[0]


@pytest.mark.parametrize(("mode", "cause", "headline"), [
    ("compute", "compute", "aten::matmul"),
    ("host", "host", "load_batch"),
    ("hang", "hang", "stuck at train_ddp.py:42 in wait_forever"),
    ("desync", "desync", "broadcast at train_ddp.py:64 in sync_metrics"),
])  # fmt: skip
def test_the_headline_is_the_cause_not_the_collective_the_others_wait_in(mode: str, cause: str, headline: str) -> None:
    """Defect 2: the BOTTLENECK column (status.summary.topBottleneck) and the next steps name what the culprit runs
    or where it stands, never gloo:all_reduce, where the healthy ranks wait for it."""
    report = analyse(mode)
    summary = build_status_summary(report)
    assert (summary.slowest_rank, summary.cause, summary.top_bottleneck) == (2, cause, headline)
    assert report.diagnosis.headline == headline
    assert not any("all_reduce" in step for step in report.diagnosis.next_steps[1:])


def test_a_desync_is_its_own_cause_with_its_own_advice() -> None:
    d = analyse("desync").diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.DESYNC)]
    assert d.next_steps[0] == cause_row(Cause.DESYNC).next_step.format(r=2)
    assert cause_row(Cause.DESYNC).next_step != cause_row(Cause.HANG).next_step


def page(mode: str) -> str:
    """report.html as it is written into the session's report/ folder (links relative to it)."""
    report = with_trace_links(analyse(mode), location_of(str(SESSIONS / mode / "report")))
    return html_bytes(report).decode()


def test_every_per_rank_figure_is_per_step_and_says_so() -> None:
    """Defect 4: the per-rank table holds per-step means only (no window totals beside a per-step median, no memcpy
    column on CPU ranks), the same figures the culprit's evidence quotes; the headline's figure is in the evidence."""
    report = analyse("compute")
    text = page("compute")
    assert "in collectives / step" in text and "of which waiting / step" in text and "host / step" in text
    per_rank = text[text.index('<h2 id="ranks">') :].split("</table>")[0]  # the per-rank table: no memcpy column
    assert "memory copies / step" not in per_rank and ">memory<" not in per_rank
    (slow,) = report.diagnosis.slow_ranks
    r2 = next(r for r in report.ranks if r.rank == 2)
    (wait,) = [e for e in slow.evidence if e.metric == "collective wait per step"]
    assert wait.value == pytest.approx(r2.collective_wait_time / r2.steps.count)  # the table's "waiting / step"
    assert r2.phases is not None and f"{r2.phases.communication_wait / 1000:,.2f} ms per step" in wait.detail
    cost = slow.evidence[0]
    excess = cost.value - cost.baseline
    if abs(excess - slow.excess_us) >= 0.05 * excess:  # the verdict's figure beside the excess where they differ
        assert f"fixing it saves {slow.excess_us / 1000:,.2f} ms per step (replayed)" in cost.detail
    else:
        assert "fixing it saves" not in cost.detail
    step = report.diagnosis.median_step_us
    for c in report.diagnosis.communication:  # per step: never more than a step
        assert c.total_us / r2.steps.count <= step


@pytest.mark.parametrize("mode", ["hang", "desync"])
def test_a_standstill_report_names_the_culprit_in_its_counts_and_leaves_out_empty_sections(mode: str) -> None:
    """Defect 5: counts and states from the hang diagnosis (one culprit, three waiting), no 0.0% slowdown, the
    wavefront's rows start at its own sequence number, each rank's stacks and Flight Recorder dump linked, and no
    section without data (time breakdown, phases, timeline, bottlenecks, communication, errors)."""
    text = page(mode)
    assert "rank 2 holds the job up; ranks 0, 1, 3 wait for it" in text
    assert " hung</dd>" not in text and "0.0%" not in text
    assert ("stuck: the culprit" if mode == "hang" else "called another collective: the culprit") in text
    assert text.count("waiting in ") >= 3
    for r in range(4):
        assert f'href="../traces/rank{r}/stacks.txt"' in text
        assert f'href="../traces/rank{r}/flight_recorder.json.gz"' in text
        assert (SESSIONS / mode / "traces" / f"rank{r}" / "flight_recorder.json.gz").is_file()
    for empty in ("breakdown", "phases", "timeline", "bottlenecks", "communication", "errors", "gpu"):
        assert f'id="{empty}"' not in text
    fr = analyse(mode).diagnosis.flight_recorder
    assert fr is not None
    for front in fr.wavefronts:
        title = f"seq {front.seq}: "
        assert title in text
        rows = text.split(title, 1)[1].split("</table>", 1)[0]
        waiting = [row for row in rows.split("<tr") if ">waiting<" in row]
        assert waiting and all(f"seq {front.seq} (not completed)" in row for row in waiting)


@pytest.mark.parametrize("mode", ["hang", "desync"])
def test_a_standstill_s_status_holds_the_culprit_apart_from_the_ranks_waiting_for_it(mode: str) -> None:
    """Defect 5: hungRanks holds the culprit only; the others are waiting ranks with what they wait in; the report's
    per-rank rows say who waits for whom (never 'hung: no step boundary' for all four), and its environment table
    fills the hung ranks' host, torch and steps from their manifests."""
    report = analyse(mode)
    summary = build_status_summary(report)
    assert (summary.hung_ranks, summary.waiting_ranks, summary.cause) == ([2], [0, 1, 3], mode)
    assert summary.waiting_in is not None and summary.waiting_in.startswith("all_reduce at train_ddp.py:")
    text = page(mode)
    assert "hung: no step boundary" not in text
    assert text.count("no step boundary: it waits for rank 2 in all_reduce") == 3
    assert text.count("no step boundary: it holds the job up") == 1
    env = text[text.index('<h2 id="environment">') :].split("</table>")[0].split("<table>")[1]
    assert "<th>host</th>" in env and "<th>torch</th>" in env
    assert env.count(">vm<") == 4 and env.count(">2.13.0+cpu<") == 4 and env.count(" steps, then none for ") == 4


@pytest.mark.parametrize("mode", ["host", "compute"])
def test_one_figure_for_what_fixing_the_rank_saves_on_the_first_screen(mode: str) -> None:
    """Items 4 and 6: the verdict's excess, its 'x faster', the gain sentence, the what-if table and the cost's
    evidence all quote the replay's saving (one number, not +57.4, +60.35 and 60.4 ms for one excess); with a slow
    rank named, no 'Top bottleneck across ranks' next step contradicts the chart's first bar."""
    d = analyse(mode).diagnosis
    (slow,) = d.slow_ranks
    (replayed,) = [w for w in d.what_if if w.change == "rank 2 ran like its peers"]
    assert slow.excess_us == pytest.approx(replayed.gain_us)
    assert replayed.gain_low_us is not None and 0 < replayed.gain_low_us <= replayed.gain_us
    assert d.expected_step_us == pytest.approx(d.median_step_us - replayed.gain_us, abs=0.2)
    assert f"+{replayed.gain_us / 1000:,.1f} ms per step" in d.verdict
    assert f"~{d.expected_step_us / 1000:,.1f} ms (~{d.estimated_speedup:.2f}x faster)" in d.verdict
    assert slow.slowdown_pct == pytest.approx(100 * replayed.gain_us / d.expected_step_us, rel=0.01)
    text = page(mode)
    assert f"({d.estimated_speedup:.2f}x faster)" in text.split('id="ranks"')[0]  # the gain sentence: the same
    cost = slow.evidence[0]
    if abs((cost.value - cost.baseline) - slow.excess_us) >= 0.05 * (cost.value - cost.baseline):
        assert f"fixing it saves {slow.excess_us / 1000:,.2f} ms per step (replayed)" in cost.detail
    assert not any(step.startswith("Top bottleneck across ranks") for step in d.next_steps)


def test_the_cost_evidence_quotes_the_verdict_s_figure_where_it_differs_from_the_excess() -> None:
    """Defect 4: the verdict's +55.3 ms (what the others wait for the rank) and the evidence's +62.66 ms (its own
    excess) are both in the evidence, each named."""
    r2 = next(s for s in rank_samples(list(analyse("compute").ranks)) if s.rank == 2)
    effect = Effect(2, 62_660.0, 400.0, 100.0, 5, 5, 0.03, 300.0, 62_960.0)
    both = cost_evidence("host", effect, 62_660.0, r2, 90_000.0, gain_us=55_300.0)
    assert "+62.66 ms per step (medians" in both.detail
    assert "of which fixing it saves 55.30 ms per step (what the others wait for it)" in both.detail
    assert "fixing it saves" not in cost_evidence("host", effect, 62_660.0, r2, 90_000.0, gain_us=62_000.0).detail
