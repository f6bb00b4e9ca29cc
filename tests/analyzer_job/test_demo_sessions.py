"""The analyzer on the demo's own sessions (fixtures/demo_sessions, see its README): what a user of `make demo` and
its variants reads. Each collective counts once per rank (gloo runs a step's bucket all-reduces concurrently on
two worker threads)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from stepscope_analyzer.pipeline import discover, summarize_all
from stepscope_analyzer.reduction import reduce_outcomes
from stepscope_analyzer.storage_io import LocalStore, location_of
from stepscope_contract.report import Report

pytestmark = pytest.mark.unit

SESSIONS = Path(__file__).parent / "fixtures" / "demo_sessions"


@functools.cache
def analyse(mode: str) -> Report:
    layout = discover(LocalStore(), location_of(str(SESSIONS / mode)))
    return reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=layout.session, notes=layout.notes)


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
