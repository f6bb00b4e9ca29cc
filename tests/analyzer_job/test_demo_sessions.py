"""The analyzer on the demo's own sessions (fixtures/demo_sessions, see its README): what a user of `make demo` and
its variants reads. Each collective counts once per rank (gloo runs a step's bucket all-reduces concurrently on
two worker threads)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.diagnosis.what_ran import OPS_LABEL
from stepscope_analyzer.pipeline import discover, summarize_all
from stepscope_analyzer.reduction import flight_recorder_dumps, reduce_outcomes
from stepscope_analyzer.storage_io import LocalStore, location_of
from stepscope_contract.report import Cause, Report

pytestmark = pytest.mark.unit

SESSIONS = Path(__file__).parent / "fixtures" / "demo_sessions"


@functools.cache
def analyse(mode: str) -> Report:
    store = LocalStore()
    layout = discover(store, location_of(str(SESSIONS / mode)))
    outcomes = summarize_all(store, layout)
    dumps = flight_recorder_dumps(store, layout)
    return reduce_outcomes(outcomes, include_missing=layout.session, notes=layout.notes, flight_recorder=dumps)


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
