"""The analyzer on real CPU jobs recorded on an oversubscribed 2-core machine (fixtures/cpu_jobs, see its README).
A 2x-batch rank among ranks that all wait for a CPU a third of their step is named through its op calls at their
least (the contention correction alone hides it), or among ranks whose sequence lengths vary per step through the
others' waiting for it; healthy ranks whose op calls differ (two vCPUs apart, variable sequence lengths) are not."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from stepscope_analyzer.diagnosis.floor_test import floor_effects
from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_contract.report import Report

pytestmark = pytest.mark.unit

JOBS = Path(__file__).parent / "fixtures" / "cpu_jobs"
NAMES = sorted(t.parent.name for t in JOBS.glob("*/truth.json"))


@functools.cache  # each recorded job is analysed once per module; the tests only read its report
def _analyse(name: str) -> Report:
    layout = discover(LocalStore(), location_of(str(JOBS / name)))
    return reduce_outcomes(summarize_all(LocalStore(), layout), include_missing=layout.session, notes=layout.notes)


@pytest.mark.parametrize("name", NAMES)
def test_the_verdict_names_what_was_planted(name: str) -> None:
    report = _analyse(name)
    truth = json.loads((JOBS / name / "truth.json").read_text())
    planted = sorted((int(s["rank"]), str(s["cause"])) for s in truth["slow_ranks"])
    assert sorted((s.rank, s.cause.value) for s in report.diagnosis.slow_ranks) == planted, report.diagnosis.verdict


@pytest.mark.parametrize(("name", "rank"), [("cpu-compute-4r-hook-2x", 1), ("cpu-compute-8r-hook-2x", 5)])
def test_the_larger_batch_is_told_from_contention_by_its_call_floors(name: str, rank: int) -> None:
    report = _analyse(name)
    effects = floor_effects(report.ranks)
    assert effects[rank].ratio > 1.6
    assert all(0.9 < e.ratio < 1.1 for r, e in effects.items() if r != rank)
    slow = report.diagnosis.slow_ranks[0]
    floors = [e for e in slow.evidence if e.metric == "op calls at their least"]
    assert floors and floors[0].value == pytest.approx(effects[rank].ratio)
    assert "more work per call" in floors[0].detail
    for r in report.ranks:  # the floors kept: the largest calls, each the least of its calls over every step
        f = r.call_floors
        assert f is not None and f.steps == r.steps.count and 20 <= len(f.calls) <= 128
        assert f.floor_us == sorted(f.floor_us, reverse=True)
        assert all(x <= min(e, o) for x, e, o in zip(f.floor_us, f.even_us, f.odd_us, strict=True))


def test_variable_length_inputs_make_the_floors_too_noisy_to_decide() -> None:
    report = _analyse("cpu-balanced-4r-transformer-shapes-0")
    effects = floor_effects(report.ranks)
    assert max(e.ratio for e in effects.values()) > 1.4  # as far apart as a straggler's
    assert all(not e.stands_out(1.4, 4.0, 3.0) for e in effects.values())  # but a rank's own halves differ as much
    assert max(e.noise for e in effects.values()) > 0.3


def test_two_healthy_ranks_on_unequal_vcpus_stay_below_the_ratio() -> None:
    effects = floor_effects(_analyse("cpu-uniform-2r-mlp-1.5x").ranks)
    assert 1.15 < max(e.ratio for e in effects.values()) < 1.4


def test_a_larger_batch_among_variable_lengths_is_named_by_the_others_waiting() -> None:
    """The median test and the floors are inside the noise of per-step lengths; the others' waiting, averaged
    over the steps, and the rank's mean compute decide (DiagnosisConfig.late_share)."""
    report = _analyse("cpu-compute-4r-transformer-2x")
    (slow,) = report.diagnosis.slow_ranks
    assert (slow.rank, slow.cause.value) == (3, "compute")
    assert slow.effect_z < 3.5  # the median test alone would not have named it
    (late,) = [e for e in slow.evidence if e.metric == "compute per step on average"]
    assert late.value > 1.4 * late.baseline
    assert "they wait for it" in late.detail and "without waiting for a CPU" in late.detail
    step = report.diagnosis.median_step_us
    (replayed,) = [w for w in report.diagnosis.what_if if w.change == "rank 3 ran like its peers"]
    assert slow.excess_us == replayed.gain_us > 0.1 * step  # the excess told is what the replay saves


def test_two_ranks_apart_by_the_lengths_they_drew_are_not_a_straggler() -> None:
    """A healthy 2-rank job whose rank 1 drew longer sequences over the recorded steps: the same figures as a
    larger batch (waited for 42% of a step, 1.7x the compute), but with one other rank there is no median to stand
    out from, so the waiting is not taken for a straggler."""
    report = _analyse("cpu-balanced-2r-transformer-40")
    assert report.diagnosis.slow_ranks == []
    waits = {r.rank: r.collective_wait_time / r.steps.count for r in report.ranks}
    assert waits[0] - waits[1] > 0.3 * report.diagnosis.median_step_us
