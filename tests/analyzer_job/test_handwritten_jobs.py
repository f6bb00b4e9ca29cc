"""The analyzer on jobs written apart from the corpus' generators (fixtures/handwritten_jobs, see its README): a
pipeline whose ranks are numbered stages fastest (replica-major, as DeepSpeed numbers them) with unnamed groups, its
layers badly split between the stages; DDP jobs on shared cores, healthy or with one rank on more rows, among them
the third set, recorded after the test of the order ranks arrive in (diagnosis.arrival_stragglers) was written, one of
whose stragglers the permutation test of the replay's saving (diagnosis.gain_permutation) names; the fifth and sixth,
recorded after the floors' peer spread (diagnosis.floor_test) was written; the seventh, pipelines whose layers are
split unevenly, recorded after a change of the stage rule that it showed wrong; the eighth, pipelines under the GPipe
and interleaved 1F1B schedules."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pytest

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.facts import job_facts
from stepscope_analyzer.diagnosis.floor_test import floor_effects
from stepscope_analyzer.diagnosis.layout import job_layout
from stepscope_analyzer.diagnosis.pipeline_findings import more_calls, variation
from stepscope_analyzer.diagnosis.rank_costs import rank_samples
from stepscope_analyzer.diagnosis.ranking import rank_what_if
from stepscope_analyzer.diagnosis.slow_ranks import find_slow_ranks
from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_contract.report import Report, WhatIf
from stepscope_testing.local_analysis import analyse_folder
from stepscope_testing.planted_cost import must_be_named

pytestmark = pytest.mark.unit

JOBS = Path(__file__).parent / "fixtures" / "handwritten_jobs"


@functools.cache
def analyse(name: str, floor_percent: float | None = None) -> Report:
    config = DiagnosisConfig(min_slowdown_percent=floor_percent) if floor_percent is not None else None
    return analyse_folder(JOBS / name, config)


def test_replicas_are_the_ranks_that_issue_the_same_collectives() -> None:
    """Unnamed groups of one size and numbering stages fastest: the pipeline is the family whose ranks issue unlike
    collectives (stage 1 holds the head: more gradient all_reduces), the replicas the family of like ones."""
    d = analyse("cpu-pp2dp2-layers-2-6").diagnosis
    assert d.layout is not None and "unnamed" in d.layout.summary
    assert [(x.rank, x.stage, x.replica) for x in d.layout.ranks] == [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)]


def test_layers_badly_split_are_a_stage_imbalance_not_two_slow_machines() -> None:
    """Item 2: stage 1 holds six blocks and the head, stage 0 two: the stage, not ranks 1 and 3, is named."""
    truth = json.loads((JOBS / "cpu-pp2dp2-layers-2-6" / "truth.json").read_text())
    d = analyse("cpu-pp2dp2-layers-2-6").diagnosis
    assert not d.slow_ranks and truth["slow_ranks"] == []
    assert [f.cause.value for f in d.findings] == truth["findings"] == ["stage_imbalance"]
    assert sorted(d.findings[0].ranks) == [1, 3] and d.verdict.startswith("Pipeline stage 1 (rank 1,3)")


def test_a_healthy_ddp_job_on_a_loaded_machine_has_no_slow_rank() -> None:
    """The held-out part's false-alarm check: four DDP ranks sharing two busy cores, nothing planted."""
    d = analyse("cpu-dp4-balanced").diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


def test_a_replica_whose_stage_runs_its_layers_twice_is_named_by_its_work() -> None:
    """Item 1: rank 2 (stage 0, replica 1) applies each block twice on cores shared with a loaded machine. Its op
    calls take no longer than its peer's (0.9x per call) and its wall-clock compute is its peer's, but it makes
    1.7x its peer's calls: comparable work (calls x time per call) names it; its peer waits for it through its
    replica's other stage."""
    truth = json.loads((JOBS / "cpu-pp2dp2-rank2-twice" / "truth.json").read_text())
    d = analyse("cpu-pp2dp2-rank2-twice").diagnosis
    assert (
        [(s.rank, s.cause.value) for s in d.slow_ranks]
        == [(2, "compute")]
        == [(s["rank"], s["cause"]) for s in truth["slow_ranks"]]
    )
    work = next(e for e in d.slow_ranks[0].evidence if e.metric == "op calls at their least")
    assert work.value > 1.4 and "op calls per step" in work.detail, work.detail
    assert d.verdict.startswith("Rank 2 slows the job"), d.verdict
    assert [f.cause.value for f in d.findings] == truth["findings"]


@pytest.mark.parametrize("name", ["cpu-pp2dp2-balanced", "cpu-dp4-balanced-w256"])
def test_healthy_jobs_of_the_second_set_have_no_slow_rank(name: str) -> None:
    """The second set's false-alarm checks: a healthy pipeline, and four DDP ranks whose blocks are wide enough for the
    products to fill the steps (one of them reads 1.2x the others' corrected compute in every step)."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


def test_the_other_replica_s_last_stage_running_its_layers_twice_is_named() -> None:
    """The second set's `twice` job: rank 3 (stage 1, replica 1) applies each block twice; rank 3, compute."""
    truth = json.loads((JOBS / "cpu-pp2dp2-rank3-twice" / "truth.json").read_text())
    d = analyse("cpu-pp2dp2-rank3-twice").diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(s["rank"], s["cause"]) for s in truth["slow_ranks"]]
    assert d.verdict.startswith("Rank 3 slows the job"), d.verdict


@pytest.mark.parametrize("name", ["cpu-dp4-balanced-w192", "cpu-dp4-balanced-w320", "cpu-dp4-balanced-w256-8steps"])
def test_healthy_jobs_of_the_third_set_have_no_slow_rank(name: str) -> None:
    """The third set's false-alarm checks: four healthy DDP ranks on two loaded cores, at three widths, one of them
    recorded over eight steps."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


def test_a_rank_on_half_again_the_rows_is_named_in_the_third_set() -> None:
    """Rank 3 trains on 1.5x the rows of its three peers (width 192, eight steps): rank 3, compute."""
    truth = json.loads((JOBS / "cpu-dp4-rank3-rows-1.5x-w192-8steps" / "truth.json").read_text())
    d = analyse("cpu-dp4-rank3-rows-1.5x-w192-8steps").diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(s["rank"], s["cause"]) for s in truth["slow_ranks"]]
    assert d.verdict.startswith("Rank 3 slows the job"), d.verdict


def test_the_rank_its_peers_wait_for_in_every_step_is_named_by_its_work_and_the_replayed_gain() -> None:
    """Rank 3 on 1.25x the rows of four DDP ranks on two loaded cores: the contention correction's residual hides its
    compute from the effect-size test, and DDP overlaps the others' waits with their backward pass. Its op calls at
    their least take 1.24x its peers' (4.3x the spread of their own ratios), its corrected compute is above theirs
    in every step, and its peers wait for it more than half of that extra work's CPU time; it also arrives last at
    most of the all_reduces of every one of the 5 steps (p = 4 x 0.25^5). The replay of the recorded steps with it
    running like its peers gains 4.1% of the step: named with the default floor of 4% (its excess that replayed gain,
    its evidence the floors); with a floor of 5% not named, and the verdict says what it would gain, the same
    figure."""
    d = analyse("cpu-dp4-rank3-rows-1.25x-w256").diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(3, "compute")], d.verdict
    slow = d.slow_ranks[0]
    floors = next(e for e in slow.evidence if e.metric == "op calls at their least")
    assert floors.value == pytest.approx(1.24, abs=0.01), floors.detail
    replayed = next(w for w in d.what_if if w.kind == "like_peers" and w.change == "rank 3 ran like its peers")
    assert slow.excess_us == replayed.gain_us and 0.04 * d.median_step_us <= slow.excess_us < 0.05 * d.median_step_us
    strict = analyse("cpu-dp4-rank3-rows-1.25x-w256", 5.0).diagnosis
    assert not strict.slow_ranks and strict.verdict.startswith("No slow rank"), strict.verdict
    assert (
        f"rank 3 arrives last at its peers' collectives in 5 of 5 steps (p = 0.0039), but the replay with it running "
        f"like its peers gains {slow.excess_us / 1000:,.1f} ms per step" in strict.verdict
    ), strict.verdict
    assert "under the 5% floor" in strict.verdict


def test_the_rank_the_replay_saves_the_most_for_beyond_chance_is_named() -> None:
    """Rank 2 on 1.25x the rows of four DDP ranks on two loaded cores (width 192): the step's last in 3 of 5 steps,
    chance among four (p = 0.41); but it did the most work in 4 of the 5 steps, by far more than its peers in the
    steps they led, and the replay's saving for it is the largest chance would give a rank of four once in 64
    (p = 4 x 0.25^4 over the ranks, under half of consistency_alpha). Its corrected compute is above its peers' in
    every step and the replay with it running like its peers gains over 5% of the step: rank 2, compute, its excess
    that gain. Its call floors name it too (1.25x its peers', whose own ratios are within 6% of 1): with that test
    left out, the permutation test alone names it."""
    name = "cpu-dp4-rank2-rows-1.25x-w192"
    truth = [(s["rank"], s["cause"]) for s in json.loads((JOBS / name / "truth.json").read_text())["slow_ranks"]]
    alone = analyse_folder(JOBS / name, DiagnosisConfig(floor_peer_multiple=math.inf)).diagnosis
    assert [(s.rank, s.cause.value) for s in alone.slow_ranks] == truth
    heaviest = next(e for e in alone.slow_ranks[0].evidence if e.metric == "heaviest in the replay")
    assert (heaviest.value, heaviest.baseline) == (4.0, 5 / 4) and "p = 0.016" in heaviest.detail, heaviest.detail
    d = analyse(name).diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == truth
    slow = d.slow_ranks[0]
    floors = next(e for e in slow.evidence if e.metric == "op calls at their least")
    assert floors.value == pytest.approx(1.25, abs=0.01)
    for diagnosis in (alone, d):
        replayed = next(w for w in diagnosis.what_if if w.change == "rank 2 ran like its peers")
        assert diagnosis.slow_ranks[0].excess_us == replayed.gain_us >= 0.05 * diagnosis.median_step_us
        assert diagnosis.verdict.startswith("Rank 2 slows the job"), diagnosis.verdict


WITHIN_THE_NOISE = [
    "cpu-dp4-rank0-rows-1.25x-w176",
    "cpu-dp4-rank0-rows-1.25x-w232",
    "cpu-dp4-rank1-rows-1.25x-w320",
    "cpu-dp4-rank2-rows-1.25x-w272-8steps",
]
"""a rank on 1.25x the rows among four DDP ranks on two cores, whose corrected compute is above its peers' in every
step but within the job's noise (effect size 1.1-1.8), whose floors do not stand out (1.14-1.28x) and whose peers'
waits are chance by both tests: only the replay of the recorded steps says what it costs (slow_ranks._flag_replayed)"""


@pytest.mark.parametrize("name", WITHIN_THE_NOISE)
def test_a_rank_above_its_peers_in_every_step_is_named_by_the_replayed_saving_clear_of_its_noise(name: str) -> None:
    """Named, compute, with the replay's saving (three standard errors clear of nothing, the user's floor or more)
    as its excess, its corrected compute's test as its evidence."""
    recorded = json.loads((JOBS / name / "truth.json").read_text())
    truth = [(s["rank"], s["cause"]) for s in recorded["slow_ranks"]]
    d = analyse(name).diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == truth, d.verdict
    slow = d.slow_ranks[0]
    assert slow.effect_z is not None and slow.effect_z < DiagnosisConfig().outlier_threshold
    replayed = next(w for w in d.what_if if w.change == f"rank {slow.rank} ran like its peers")
    assert slow.excess_us == replayed.gain_us >= FLOOR * d.median_step_us
    assert replayed.gain_high_us is not None and replayed.gain_us >= 3 * (replayed.gain_high_us - replayed.gain_us) / 2
    compute = next(e for e in slow.evidence if e.metric.startswith("compute per step"))
    steps = recorded["job"]["steps"]
    assert f"higher than the other ranks in {steps} of {steps} steps" in compute.detail, compute.detail


def test_without_the_replay_or_with_its_saving_in_the_noise_the_rank_is_not_named() -> None:
    """In that data-parallel job (no layout: the detector hands the replay to find_slow_ranks) the same rank is not
    named without the replay (the cost tests alone: within the noise), nor where the replay's saving is the same but
    its noise interval three times as wide."""
    store = LocalStore()
    layout = discover(store, location_of(str(JOBS / "cpu-dp4-rank1-rows-1.25x-w320")))
    facts = job_facts([o.summary for o in summarize_all(store, layout) if o.skipped is None])
    cfg = DiagnosisConfig()
    assert facts.layout is None
    replayed = functools.partial(rank_what_if, facts)
    assert [s.rank for s in find_slow_ranks(facts.ok, cfg, replayed=replayed)] == [1]
    assert find_slow_ranks(facts.ok, cfg) == []

    def wider(rank: int) -> WhatIf | None:
        w = replayed(rank)
        if w is None or w.gain_high_us is None:
            return w
        half = 3 * (w.gain_high_us - w.gain_us)
        return w.model_copy(update={"gain_low_us": w.gain_us - half, "gain_high_us": w.gain_us + half})

    assert find_slow_ranks(facts.ok, cfg, replayed=wider) == []


ELEVENTH_HEALTHY = [f"cpu-dp4-balanced-{w}" for w in ("w216", "w248", "w280-8steps", "w312")]
ELEVENTH_NAMED = [
    "cpu-dp4-rank2-rows-1.25x-w216",
    "cpu-dp4-rank3-rows-1.25x-w280-8steps",
    "cpu-dp4-rank2-rows-1.25x-w312",
]
ELEVENTH_UNDER_THE_FLOOR = {"cpu-dp4-rank0-rows-1.25x-w248": 0, "cpu-dp4-rank1-rows-1.25x-w216": 1}


@pytest.mark.parametrize("name", ELEVENTH_HEALTHY)
def test_healthy_jobs_of_the_eleventh_set_have_no_slow_rank(name: str) -> None:
    """The eleventh set, recorded after the replay's test was written and kept whatever it diagnosed: four healthy
    DDP jobs at widths not recorded before, quiet and beside two busy loops."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


@pytest.mark.parametrize("name", ELEVENTH_NAMED)
def test_ranks_on_more_rows_in_the_eleventh_set_are_named(name: str) -> None:
    truth = [(s["rank"], s["cause"]) for s in json.loads((JOBS / name / "truth.json").read_text())["slow_ranks"]]
    d = analyse(name).diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == truth, d.verdict
    assert d.slow_ranks[0].excess_us >= FLOOR * d.median_step_us


@pytest.mark.parametrize(("name", "rank"), sorted(ELEVENTH_UNDER_THE_FLOOR.items()))
def test_ranks_the_replay_prices_under_the_floor_in_the_eleventh_set_are_said_not_named(name: str, rank: int) -> None:
    """Their compute stands out, but the replay with them running like their peers saves less than the floor: the
    verdict says so, with that saving."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks, d.verdict
    said = f"rank {rank}'s compute stands out against its peers'"
    assert said in d.verdict and "the replay with it running like its peers saves" in d.verdict, d.verdict
    assert "under the 4% floor" in d.verdict, d.verdict


@pytest.mark.parametrize(
    "name", ["cpu-dp4-balanced-w224", "cpu-dp4-balanced-w288", "cpu-dp4-balanced-w160", "cpu-dp4-balanced-w224-8steps"]
)
def test_healthy_jobs_of_the_fourth_set_have_no_slow_rank(name: str) -> None:
    """The fourth set's false-alarm checks, recorded after the permutation test of the replay's saving was written:
    four healthy DDP ranks on two loaded cores at three other widths, one of them over eight steps."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


FIFTH_AND_SIXTH_HEALTHY = [
    "cpu-dp4-balanced-w176", "cpu-dp4-balanced-w208", "cpu-dp4-balanced-w240", "cpu-dp4-balanced-w272-8steps",
    "cpu-dp4-balanced-w200", "cpu-dp4-balanced-w232", "cpu-dp4-balanced-w264-8steps", "cpu-dp4-balanced-w296",
]  # fmt: skip


@pytest.mark.parametrize("name", FIFTH_AND_SIXTH_HEALTHY)
def test_healthy_jobs_of_the_fifth_and_sixth_sets_have_no_slow_rank(name: str) -> None:
    """The fifth and sixth sets' false-alarm checks, recorded after the floors' peer spread was written: four healthy
    DDP ranks at four more widths each, on a quiet machine (the fifth) and beside two busy loops (the sixth)."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


def test_a_rank_whose_floors_stray_far_beyond_its_peers_is_named() -> None:
    """Rank 1 on 1.25x the rows (fifth set, quiet machine, width 208): its op calls at their least take 1.22x the
    others', whose own ratios stay within 5% of 1, while the floors of a rank's even and odd steps differ by 8%
    (4x that is over the ratio, as is floor_ratio): of the floors' tests, only the peers' spread tells the extra
    work from noise. The others wait for it, and the replay with it running like its peers gains over 5% of the step,
    clear of its noise: without the peers' spread that test names it (its corrected compute above its peers' in every
    step); with neither, no test does."""
    name = "cpu-dp4-rank1-rows-1.25x-w208"
    truth = [(s["rank"], s["cause"]) for s in json.loads((JOBS / name / "truth.json").read_text())["slow_ranks"]]
    d = analyse(name).diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == truth == [(1, "compute")]
    floors = next(e for e in d.slow_ranks[0].evidence if e.metric == "op calls at their least")
    assert floors.value == pytest.approx(1.22, abs=0.01) and "ratios stay within 5% of 1" in floors.detail
    replayed = next(w for w in d.what_if if w.change == "rank 1 ran like its peers")
    assert d.slow_ranks[0].excess_us == replayed.gain_us >= 0.05 * d.median_step_us
    replay = analyse_folder(JOBS / name, DiagnosisConfig(floor_peer_multiple=math.inf)).diagnosis
    assert [(s.rank, s.cause.value) for s in replay.slow_ranks] == truth
    assert not any(e.metric == "op calls at their least" for e in replay.slow_ranks[0].evidence)
    assert replay.slow_ranks[0].excess_us == replayed.gain_us
    neither = DiagnosisConfig(floor_peer_multiple=math.inf, replayed_gain_z=math.inf)
    without = analyse_folder(JOBS / name, neither).diagnosis
    assert not without.slow_ranks and without.verdict.startswith("No slow rank"), without.verdict


@pytest.mark.parametrize("name", ["cpu-pp2dp2-balanced-4-4", "cpu-pp2dp2-balanced-w256"])
def test_healthy_pipelines_of_the_seventh_set_have_no_finding(name: str) -> None:
    """Two healthy pp2 x dp2 jobs beside busy loops (load 6.6-7.1): neither a slow rank nor a stage imbalance."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks and not [f for f in d.findings if f.cause.value == "stage_imbalance"], d.verdict
    assert d.verdict.startswith("No slow rank"), d.verdict


@pytest.mark.parametrize(("name", "ratio"), [("cpu-pp2dp2-layers-2-4", "1.83x"), ("cpu-pp2dp2-layers-3-5", "1.56x")])
def test_a_stage_holding_more_layers_is_a_stage_imbalance_by_its_op_work(name: str, ratio: str) -> None:
    """Layers split 2-4 and 3-5 (seventh set): stage 1's op calls at their least time add up to 1.83x and 1.56x
    stage 0's per step (what waiting for a CPU does not raise; its compute without contention stretches read 2.09x
    and 1.70x), every rank of it above 1.3x every rank of stage 0: a stage imbalance of stage 1's ranks, not a slow
    rank. (The 5-3 split reads 1.30x between the stages' medians, 1.21x between its replicas' extremes: missed.)"""
    d = analyse(name).diagnosis
    assert not d.slow_ranks, d.verdict
    [stage] = [f for f in d.findings if f.cause.value == "stage_imbalance"]
    assert stage.stage == 1 and stage.ranks == [1, 3], stage.summary
    assert f"does {ratio} the other stages' op work per step (its op calls at their least time" in stage.summary


def test_the_op_work_counts_every_call_not_only_the_listed_ones() -> None:
    """Layers split 2-4: the 128 calls with the largest floors that a summary lists read stage 1 at 1.2x stage 0
    (a stage of many short calls leaves most of them out); the op work, every call present in every step at its
    least time, reads 1.8x, as its twice the layers less the head and the loss."""
    ranks = {r.rank: r.call_floors for r in analyse("cpu-pp2dp2-layers-2-4").ranks}
    assert all(f is not None and len(f.calls) == 128 and f.total_us > sum(f.floor_us) for f in ranks.values())
    listed = {k: sum(f.floor_us) for k, f in ranks.items() if f is not None}
    total = {k: f.total_us for k, f in ranks.items() if f is not None}
    assert listed[1] / listed[0] < 1.3 and listed[3] / listed[2] < 1.3
    assert total[1] / total[0] > 1.75 and total[3] / total[2] > 1.75


def test_a_rank_that_takes_cpu_from_its_peers_on_a_shared_node_is_named_by_its_work() -> None:
    """Rank 3 on 1.5x the rows of four DDP ranks sharing two cores (their work stretched ~2x by waiting for a CPU):
    its op calls at their least take 1.43x its peers', but the scheduler runs it first often enough that its peers
    wait for it less than half its extra work (the wait check alone leaves it out). On a node whose CPU its ranks
    oversubscribe the extra work costs the others CPU time (diagnosis.shared_cpu): rank 3, compute, its excess what
    the replay saves, above the 5% floor."""
    d = analyse("cpu-dp4-rank3-rows-1.5x-w240").diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(3, "compute")], d.verdict
    slow = d.slow_ranks[0]
    replayed = next(w for w in d.what_if if w.kind == "like_peers" and w.change == "rank 3 ran like its peers")
    assert slow.excess_us == replayed.gain_us >= 0.05 * d.median_step_us
    floors = next(e for e in slow.evidence if e.metric == "op calls at their least")
    assert floors.value == pytest.approx(1.43, abs=0.01), floors.detail
    assert f"+{slow.excess_us / 1000:,.1f} ms per step" in d.verdict


EIGHTH_HEALTHY = [
    "cpu-pp2dp2-gpipe-balanced",
    "cpu-pp2dp2-interleaved-balanced",
    "cpu-pp2dp2-interleaved-balanced-w256",
]


@pytest.mark.parametrize("name", EIGHTH_HEALTHY)
def test_healthy_pipelines_of_the_eighth_set_have_no_finding(name: str) -> None:
    """Healthy pp2 x dp2 jobs under GPipe and interleaved 1F1B (two stages per rank), quiet and beside busy loops."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


@pytest.mark.parametrize(
    "name", ["cpu-pp2dp2-interleaved-balanced", "cpu-pp2dp2-interleaved-layers-2-6", "cpu-pp2dp2-gpipe-layers-2-6"]
)
def test_the_work_a_schedule_runs_while_its_sends_are_in_flight_is_compute(name: str) -> None:
    """The pipeline schedules send activations and gradients asynchronously and compute the next microbatch while
    they are in flight (gloo's send spans last from the isend to the end of its wait): every rank's compute per step
    (forward, backward, optimizer) is at least its op calls at their least time, which it runs in."""
    for r in analyse(name).ranks:
        assert r.phases is not None and r.call_floors is not None
        compute = r.phases.forward + r.phases.backward + r.phases.optimizer
        assert compute >= r.call_floors.total_us, (r.rank, compute, r.call_floors.total_us)


@pytest.mark.parametrize(
    ("name", "ratio"),
    [
        ("cpu-pp2dp2-gpipe-layers-2-6", "2.87x"),
        ("cpu-pp2dp2-interleaved-layers-2-6", "2.47x"),
        ("cpu-pp2dp2-interleaved-layers-3-5-w256", "1.63x"),
    ],
)
def test_layers_badly_split_are_a_stage_imbalance_under_gpipe_and_interleaved_1f1b(name: str, ratio: str) -> None:
    """Stage 1 holding six blocks and the head against two (three against five at width 256), under GPipe and under
    interleaved 1F1B, where each rank's blocks are split between two stages of the schedule: stage 1's ranks."""
    d = analyse(name).diagnosis
    assert not d.slow_ranks, d.verdict
    assert [f.cause.value for f in d.findings] == ["stage_imbalance"], d.verdict
    assert d.findings[0].stage == 1 and d.findings[0].ranks == [1, 3]
    assert f"does {ratio} the other stages' op work per step" in d.findings[0].summary


@pytest.mark.parametrize(
    ("name", "rank"), [("cpu-pp2dp2-gpipe-rank2-twice", 2), ("cpu-pp2dp2-gpipe-rank3-twice-w256", 3)]
)
def test_a_replica_running_its_layers_twice_under_gpipe_is_named(name: str, rank: int) -> None:
    truth = json.loads((JOBS / name / "truth.json").read_text())
    d = analyse(name).diagnosis
    assert (
        [(s.rank, s.cause.value) for s in d.slow_ranks]
        == [(rank, "compute")]
        == [(s["rank"], s["cause"]) for s in truth["slow_ranks"]]
    ), d.verdict
    assert d.verdict.startswith(f"Rank {rank} slows the job"), d.verdict


def test_a_replica_making_twice_the_calls_is_named_not_read_as_varying_data() -> None:
    """Interleaved 1F1B at width 256 beside busy loops, rank 2 running its blocks twice: its op calls at their least
    add up to 1.87x its peer's (twice the calls, each as long). The floors of a rank's even and odd steps differ by
    up to 1.19x, and the floor test asks for 3x that (its log) before it calls a ratio work: 1.99 clears it, and the
    rank is named for its compute. That split-half noise is over the data-imbalance bar, yet the inputs are fixed:
    rank 2 makes twice its peer's op calls in every step, which varying inputs do not do, so the job's variation is
    not named the data's."""
    report = analyse("cpu-pp2dp2-interleaved-rank2-twice-w256")
    layout = job_layout(report.ranks)
    cfg = DiagnosisConfig()
    assert layout is not None and more_calls(report.ranks, layout, cfg.floor_ratio) == [2]
    work = {r.rank: r.call_floors.total_us for r in report.ranks if r.call_floors is not None}
    assert work[2] / work[0] > 1.8
    floors = floor_effects([r for r in report.ranks if r.rank in (0, 2)])[2]
    assert floors.call_ratio == pytest.approx(2.0, abs=0.05) and floors.per_call == pytest.approx(1.0, abs=0.05)
    assert math.log(floors.ratio) < 4 * floors.noise  # 4x the noise would not clear it: the multiple decides this job
    assert floors.stands_out(cfg.floor_ratio, cfg.floor_noise_multiple, cfg.floor_peer_multiple)
    compute = {s.rank: s.tested["compute"] for s in rank_samples(report.ranks)}
    varies = variation(report.ranks, layout, compute, gpu=False)
    assert varies.value >= varies.threshold  # the bar the data-imbalance finding would clear
    d = report.diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(2, "compute")], d.verdict
    assert not [f for f in d.findings if f.cause.value == "data_imbalance"], d.verdict


def test_four_stages_healthy_badly_split_and_with_a_slow_replica() -> None:
    """pp4 x dp2 under 1F1B with 4 microbatches (the schedule idles 3/7 of a step): healthy, the bubble alone; the
    last stage holding five blocks and the head against two, a stage imbalance of its ranks beside the bubble; rank 6
    (stage 2, replica 1) running its blocks twice, named among its peers."""
    healthy = analyse("cpu-pp4dp2-balanced").diagnosis
    assert not healthy.slow_ranks and [f.cause.value for f in healthy.findings] == ["pipeline_bubble"], healthy.verdict
    split = analyse("cpu-pp4dp2-layers-2-2-2-5").diagnosis
    assert not split.slow_ranks, split.verdict
    assert sorted(f.cause.value for f in split.findings) == ["pipeline_bubble", "stage_imbalance"]
    stage = next(f for f in split.findings if f.cause.value == "stage_imbalance")
    assert stage.stage == 3 and stage.ranks == [3, 7], stage.summary
    twice = analyse("cpu-pp4dp2-rank6-twice").diagnosis
    assert [(s.rank, s.cause.value) for s in twice.slow_ranks] == [(6, "compute")], twice.verdict


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("cpu-dp4-rank2-python-25ms", 2),
        ("cpu-pp2dp2-rank3-python-25ms", 3),
        ("cpu-pp2dp2-interleaved-rank0-python-25ms", 0),
    ],
)
def test_plain_python_work_on_one_rank_is_a_host_straggler_with_one_figure(name: str, rank: int) -> None:
    """25 ms of CPU time per step in plain Python before the step's work, on one rank of a DDP job, a 1F1B pipeline
    and an interleaved one: the rank is named for its host time, and the verdict's excess, the replayed gain and the
    step without it are one figure."""
    d = analyse(name).diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(rank, "host")], d.verdict
    excess = d.slow_ranks[0].excess_us
    replayed = next(w for w in d.what_if if w.change == f"rank {rank} ran like its peers")
    assert excess == replayed.gain_us >= 0.05 * d.median_step_us
    assert f"+{excess / 1000:,.1f} ms per step" in d.verdict
    assert f"would take ~{replayed.step_us / 1000:,.1f} ms" in d.verdict


TP_HEALTHY = ["cpu-dp2tp2-balanced", "cpu-dp2tp2-balanced-w256"]


@pytest.mark.parametrize("name", TP_HEALTHY)
def test_a_healthy_tensor_parallel_job_has_no_finding_and_equal_op_work(name: str) -> None:
    """dp2 x tp2 over a DeviceMesh ("dp", "tp"), DTensor's ColwiseParallel and RowwiseParallel on every block: the
    layout is read from the mesh's groups, and a rank's wait for its TP group inside the functional collectives
    (`_c10d_functional::wait_tensor`, under the layer's own op) is communication, not its work: the four ranks'
    op calls at their least agree within 10% (counting the waits, 1.55x apart in the quiet job)."""
    report = analyse(name)
    d = report.diagnosis
    assert d.layout is not None and d.layout.summary.startswith("4 ranks = 2 replicas x 2 TP ranks"), d.layout
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict
    work = [r.call_floors.total_us for r in report.ranks if r.call_floors is not None]
    assert len(work) == 4 and max(work) / min(work) < 1.1, work


def test_a_tensor_parallel_rank_computing_more_is_a_tp_straggler() -> None:
    """Rank 1 running its share of every block's products 8 more times in the forward: named, compute, and a TP
    straggler of its group (0,1)."""
    d = analyse("cpu-dp2tp2-rank1-slow-8").diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(1, "compute")], d.verdict
    [tp] = [f for f in d.findings if f.cause.value == "tp_straggler"]
    assert tp.ranks == [0, 1] and tp.summary.startswith("rank 1 holds its tensor-parallel group"), tp.summary


def test_plain_python_work_on_a_tensor_parallel_rank_is_a_host_straggler() -> None:
    d = analyse("cpu-dp2tp2-rank3-python-25ms").diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(3, "host")], d.verdict
    assert not [f for f in d.findings if f.cause.value == "tp_straggler"]


@pytest.mark.parametrize(
    ("name", "rank"), [("cpu-pp2dp2-interleaved-rank1-twice", 1), ("cpu-dp2tp2-rank3-slow-2-w256", 3)]
)
def test_a_rank_that_stands_out_under_the_floor_is_said_not_named(name: str, rank: int) -> None:
    """Rank 1 running its blocks twice under interleaved 1F1B, rank 3 of a TP group running its products twice more:
    each one's compute stands out and its peers wait for it, but under 5% of the step. With a floor of 5% the
    verdict says so, with what they wait; at a floor of 2% the rank is named, compute."""
    d = analyse(name, 5.0).diagnosis
    assert not d.slow_ranks and d.verdict.startswith("No slow rank"), d.verdict
    assert f"rank {rank}'s compute stands out against its peers' (+" in d.verdict, d.verdict
    assert "ms per step, under the 5% floor" in d.verdict, d.verdict
    lower = analyse(name, 2.0).diagnosis
    assert [(s.rank, s.cause.value) for s in lower.slow_ranks] == [(rank, "compute")], lower.verdict


def test_a_stage_s_peers_are_held_to_the_floor_of_the_job_s_step() -> None:
    """Rank 1 running its blocks twice under interleaved 1F1B: rank 0, its peer in the other replica, waits for it
    5.8 ms per step, 4.5% of the job's 129.5 ms median step, the step the verdict quotes. The floor (4%) is a share
    of that step, not of the median of the stage's two ranks' steps (longer): named, its excess the same figure."""
    d = analyse("cpu-pp2dp2-interleaved-rank1-twice").diagnosis
    assert [(s.rank, s.cause.value) for s in d.slow_ranks] == [(1, "compute")], d.verdict
    slow = d.slow_ranks[0]
    assert FLOOR * d.median_step_us <= slow.excess_us < 0.05 * d.median_step_us, (slow.excess_us, d.median_step_us)
    assert f"+{slow.excess_us / 1000:,.1f} ms per step" in d.verdict
    assert f"steps take {d.median_step_us / 1000:,.1f} ms" in d.verdict


CALIBRATED = sorted(p.parent.name for p in JOBS.glob("*-cal/truth.json"))
"""the ninth set: recorded with `--calibrate 48`, each faulted job's truth holding what its fault costs the job"""
FLOOR = DiagnosisConfig().min_slowdown_percent / 100.0


@pytest.mark.parametrize("name", CALIBRATED)
def test_a_fault_is_named_when_the_job_surely_pays_the_floor_for_it_and_not_when_it_surely_does_not(
    name: str,
) -> None:
    """The ninth set, chosen before any was recorded and kept whatever it diagnosed: where the calibration's
    interval of what the fault costs the job (the fault off and on in turn, in the same run) is above the 5% floor,
    the planted rank is named as the truth says; where it is below, no rank is; a healthy job names none. A job
    whose interval holds the floor is only required to name no healthy rank."""
    truth = json.loads((JOBS / name / "truth.json").read_text())
    d = analyse(name).diagnosis
    named = [(s.rank, s.cause.value) for s in d.slow_ranks]
    planted = [(s["rank"], s["cause"]) for s in truth["slow_ranks"]]
    expected = must_be_named(truth["planted_cost"], FLOOR) if "planted_cost" in truth else None
    assert {r for r, _ in named} <= {r for r, _ in planted}, d.verdict
    if not planted:
        assert not named and d.verdict.startswith("No slow rank"), d.verdict
    elif expected:
        assert named == planted, d.verdict
    elif expected is False:
        assert not named, d.verdict


def test_the_ninth_set_holds_faults_on_both_sides_of_the_floor() -> None:
    """The calibrations tell some faults apart from the floor on either side, so the test above checks both."""
    truths = [json.loads((JOBS / name / "truth.json").read_text()) for name in CALIBRATED]
    verdicts = [must_be_named(t["planted_cost"], FLOOR) for t in truths if "planted_cost" in t]
    assert len(CALIBRATED) == 10 and len(verdicts) == 8
    assert verdicts.count(True) == 3
    assert verdicts.count(False) == 1
