"""Diagnosis on synthetic jobs (per-step samples, noise per rank and step): planted slow ranks are named with their
cause and the numbers a user reads; balanced jobs, uniformly slower jobs and ranks that only arrive last are not
slow ranks; one default serves a noisy job and a quiet one; two-rank jobs blame one rank."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis import DiagnosisConfig, HangEvidence, diagnose
from stepscope_contract.report import Cause, RankStatus
from stepscope_contract.session import AnalysisSpec
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("measured_wait", [True, False])
def test_balanced_job_with_noise_has_no_slow_rank(seed: int, measured_wait: bool) -> None:
    ranks = synthetic_job(JobShape(world_size=16), noise=0.03, seed=seed, measured_wait=measured_wait)
    d = diagnose(ranks)
    assert d.slow_ranks == []
    assert d.slow_nodes == []
    assert d.verdict.startswith("No slow rank")


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("seed", range(8))
def test_noisy_balanced_job_has_no_false_alarm_at_default_settings(world: int, seed: int) -> None:
    """A shared-CPU job: 10% step-to-step noise on every rank; the default must not see a straggler in it."""
    ranks = synthetic_job(JobShape(world_size=world, steps=6), noise=0.10, seed=seed)
    assert diagnose(ranks).slow_ranks == []


def test_quiet_job_shows_a_seven_percent_compute_straggler_at_default_settings() -> None:
    """A quiet GPU job (0.5% noise): a consistent straggler costing ~7% of the step is found, with its numbers."""
    shape = JobShape(world_size=8, steps=6, compute_us=60_000, host_us=2_000, memory_us=1_000, transfer_us=10_000)
    ranks = synthetic_job(shape, slow_rank=6, cause=Cause.COMPUTE, extra_us=5_100, noise=0.005, seed=1)
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(6, Cause.COMPUTE)]
    slow = d.slow_ranks[0]
    assert slow.excess_us == pytest.approx(5_100, rel=0.1)
    assert slow.effect_z is not None and slow.effect_z > 3.5
    assert slow.phase == "backward"


@pytest.mark.parametrize("cause", [Cause.COMPUTE, Cause.HOST, Cause.MEMORY])
@pytest.mark.parametrize("seed", range(3))
def test_planted_slow_rank_is_named_with_its_cause(cause: Cause, seed: int) -> None:
    ranks = synthetic_job(JobShape(world_size=8), slow_rank=5, cause=cause, extra_us=12_000, seed=seed)
    d = diagnose(ranks)
    assert [s.rank for s in d.slow_ranks] == [5]
    slow = d.slow_ranks[0]
    assert slow.cause is cause
    assert 0.8 <= slow.confidence <= 1.0
    assert slow.node == "node-1"
    assert slow.evidence, "a slow rank comes with evidence"
    assert d.verdict.startswith("Rank 5 on node node-1 slows the job")
    assert f"cause {cause.value}" in d.verdict
    assert d.next_steps


def test_slow_communication_needs_a_measured_wait() -> None:
    """Collectives end together on every rank: without a measure of the wait, a rank's own transfer time cannot
    be told apart from waiting; with one, a rank whose own collectives are slow is named."""
    ranks = synthetic_job(slow_rank=3, cause=Cause.COMMUNICATION, extra_us=15_000, measured_wait=True)
    assert [(s.rank, s.cause) for s in diagnose(ranks).slow_ranks] == [(3, Cause.COMMUNICATION)]


def test_numbers_read_as_a_user_reads_them() -> None:
    """steps take T; with the rank like its peers (replayed) they would take about T - E, E its excess; speedup
    T / that; every figure once."""
    ranks = synthetic_job(JobShape(world_size=4), slow_rank=1, cause=Cause.HOST, extra_us=60_000, noise=0.01)
    d = diagnose(ranks)
    slow = d.slow_ranks[0]
    assert slow.excess_us == pytest.approx(60_000, rel=0.05)
    replayed = next(w for w in d.what_if if w.kind == "like_peers")
    assert d.expected_step_us == pytest.approx(replayed.step_us, abs=0.1)
    assert d.expected_step_us == pytest.approx(d.median_step_us - slow.excess_us, rel=0.02)
    assert d.estimated_speedup == pytest.approx(d.median_step_us / d.expected_step_us)
    assert slow.slowdown_pct == pytest.approx(100 * slow.excess_us / d.expected_step_us, rel=0.03)
    assert f"steps take {d.median_step_us / 1000:,.1f} ms" in d.verdict
    assert f"~{d.expected_step_us / 1000:,.1f} ms" in d.verdict
    assert f"~{d.estimated_speedup:.2f}x faster" in d.verdict
    assert d.p90_step_us >= d.median_step_us > 0


def test_uniformly_slower_job_is_not_a_straggler() -> None:
    """Every rank got 40% more compute (a code change): the regression gate's job, not a slow rank."""
    ranks = synthetic_job(JobShape(world_size=8, compute_us=84_000), noise=0.03, seed=2)
    d = diagnose(ranks)
    assert d.slow_ranks == [] and d.verdict.startswith("No slow rank")


def test_last_to_arrive_alone_is_not_a_slow_rank() -> None:
    """On a busy CPU the scheduler keeps stretching one rank's work: it arrives last in every step, the others wait
    15% of a step for it. Its ops ran at their usual speed when they ran (the stretch is waiting for a CPU, what
    step_dilation measures), so no cost of its own stands out: not a slow rank."""
    ranks = synthetic_job(JobShape(world_size=4, steps=6), noise=0.03, seed=5)
    late = ranks[2]
    rows, dilation = [], []
    for p in late.step_phases:
        lag = min(0.15 * sum(p.model_dump().values()), p.communication_wait)
        compute = p.forward + p.backward + p.optimizer
        dilation.append((compute + lag) / compute)
        rows.append(p.model_copy(update={"communication_wait": p.communication_wait - lag,
                                         "backward": p.backward + lag}))  # fmt: skip
    ranks[2] = late.model_copy(update={"step_phases": rows, "step_dilation": dilation})
    d = diagnose(ranks)
    assert d.slow_ranks == [], d.verdict
    ranks[2] = ranks[2].model_copy(update={"step_dilation": []})  # the same excess, without contention: slow
    assert [(s.rank, s.cause) for s in diagnose(ranks).slow_ranks] == [(2, Cause.COMPUTE)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("waited", "own"), [(0.2, 0.01), (0.25, 0.02), (0.4, 0.03)])
def test_a_rank_kept_waiting_for_a_cpu_is_not_named_for_its_wait(seed: int, waited: float, own: float) -> None:
    """On shared cores the scheduler keeps one rank waiting for a CPU a fifth of a step or more, in every step, and
    it also computes a little more than its peers (1-3% of a step). Its peers wait for it in every step and the
    replay of the recorded steps gains its whole lag, of which its own work is a small part: not a slow rank, and
    where the verdict names it, it says the rest was waiting for a CPU. Without the measured CPU wait the same lag
    is its own compute: named."""
    ranks = synthetic_job(JobShape(world_size=4, steps=6), noise=0.03, seed=seed)
    late = ranks[2]
    rows, dilation = [], []
    for p in late.step_phases:
        step = sum(p.model_dump().values())
        lag, extra = waited * step, own * step
        compute = p.forward + p.backward + p.optimizer + extra
        dilation.append((compute + lag) / compute)
        rows.append(p.model_copy(update={"communication_wait": p.communication_wait - lag - extra,
                                         "backward": p.backward + lag + extra}))  # fmt: skip
    ranks[2] = late.model_copy(update={"step_phases": rows, "step_dilation": dilation})
    d = diagnose(ranks)
    assert d.slow_ranks == [], d.verdict
    if "rank 2" in d.verdict:  # where its peers' waiting names it (in most draws), the verdict says what it was
        assert "the rest is time it waited for a CPU" in d.verdict, d.verdict
    ranks[2] = ranks[2].model_copy(update={"step_dilation": []})
    assert [(s.rank, s.cause) for s in diagnose(ranks).slow_ranks] == [(2, Cause.COMPUTE)]


def test_small_difference_below_the_floor_is_not_reported() -> None:
    ranks = synthetic_job(slow_rank=3, cause=Cause.COMPUTE, extra_us=2_500, noise=0.002)  # ~3.2% of a step
    assert diagnose(ranks).slow_ranks == []
    strict = DiagnosisConfig.from_spec(AnalysisSpec(min_slowdown_percent=1.0))
    assert [s.rank for s in diagnose(ranks, config=strict).slow_ranks] == [3]


def test_a_cost_the_others_hardly_wait_for_is_not_reported() -> None:
    """Rank 1 spends 8 ms more per step on host work and 7.5 ms less computing (another kernel choice, say): its
    host time stands out, but the others wait only ~0.5 ms per step for it, below the floor of what fixing it saves."""
    balanced = synthetic_job(
        JobShape(world_size=4, steps=6), noise=0.002, extra={1: {"host": 8_000.0, "compute": -7_500.0}}
    )
    assert diagnose(balanced).slow_ranks == [], diagnose(balanced).verdict
    waited = synthetic_job(JobShape(world_size=4, steps=6), noise=0.002, extra={1: {"host": 8_000.0}})
    assert [(s.rank, s.cause) for s in diagnose(waited).slow_ranks] == [(1, Cause.HOST)]


@pytest.mark.parametrize("slow", [0, 1])
def test_two_ranks_blame_the_one_the_other_waits_for(slow: int) -> None:
    ranks = synthetic_job(JobShape(world_size=2, steps=6), slow_rank=slow, cause=Cause.HOST, extra_us=40_000)
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(slow, Cause.HOST)]
    assert d.slow_ranks[0].confidence < 0.9  # one rank to compare with


def test_two_ranks_never_both_slow_for_the_same_cost() -> None:
    for seed in range(20):
        ranks = synthetic_job(JobShape(world_size=2, steps=6), slow_rank=1, cause=Cause.COMPUTE, extra_us=20_000,
                              noise=0.08, seed=seed)  # fmt: skip
        assert [s.rank for s in diagnose(ranks).slow_ranks] in ([], [1])


def test_slow_node_groups_its_slow_ranks() -> None:
    slow = {r: {"compute": 25_000.0} for r in range(4, 8)}  # every rank of node-1 computes 25 ms more per step
    ranks = synthetic_job(JobShape(world_size=16, ranks_per_node=4), noise=0.01, extra=slow)
    d = diagnose(ranks)
    assert sorted(s.rank for s in d.slow_ranks) == [4, 5, 6, 7]
    assert [(n.node, n.ranks, n.cause) for n in d.slow_nodes] == [("node-1", [4, 5, 6, 7], Cause.COMPUTE)]
    assert "node node-1" in d.verdict


def test_two_stragglers_at_once_are_both_named() -> None:
    ranks = synthetic_job(JobShape(world_size=8), noise=0.02, extra={2: {"host": 30_000.0}, 5: {"compute": 20_000.0}})
    d = diagnose(ranks)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.HOST), (5, Cause.COMPUTE)]
    # fixing both (replayed) is the job's gain, and the two excesses are its shares: they add up to it
    both = next(w for w in d.what_if if w.kind == "all_like_peers")
    assert d.expected_step_us == pytest.approx(both.step_us, abs=0.1)
    assert d.expected_step_us == pytest.approx(d.median_step_us - sum(s.excess_us for s in d.slow_ranks), abs=1.0)
    # fixing rank 2 alone leaves the job waiting for rank 5: it gains less than fixing both
    alone = next(w for w in d.what_if if w.change == "rank 2 ran like its peers")
    assert 0 < alone.gain_us < both.gain_us - 0.5 * d.slow_ranks[1].excess_us


def test_evidence_names_the_cost_the_phase_the_wait_and_the_kernel() -> None:
    ranks = synthetic_job(slow_rank=2, cause=Cause.COMPUTE, extra_us=20_000)
    slow = diagnose(ranks).slow_ranks[0]
    names = [e.metric for e in slow.evidence]
    assert names[0].startswith("compute per step")
    assert "phase backward" in names
    assert "attention_fwd_kernel_slowpath" in names
    kernel = next(e for e in slow.evidence if e.metric == "attention_fwd_kernel_slowpath")
    assert kernel.value == pytest.approx(20_000, rel=1e-6) and kernel.baseline == 0.0
    wait = next(e for e in slow.evidence if e.metric == "collective wait per step")
    assert wait.value < wait.baseline and "estimated" in wait.detail


def test_host_evidence_names_the_data_loader() -> None:
    slow = diagnose(synthetic_job(slow_rank=0, cause=Cause.HOST, extra_us=30_000)).slow_ranks[0]
    assert slow.cause is Cause.HOST and slow.phase == "data_loading"
    assert any("dataloader.py" in e.metric for e in slow.evidence)


def test_world_coverage_is_said() -> None:
    d = diagnose(synthetic_job(JobShape(world_size=4)), world_size=128)
    assert d.ranks_analysed == 4 and d.ranks_expected == 128
    assert "only 4 of 128 ranks analysed: 124 never seen" in d.verdict


def test_hang_names_the_rank_outside_the_collective() -> None:
    waiting = (
        'Thread 0x1 (most recent call first):\n  File "/x/torch/distributed/distributed_c10d.py", line 2501 in '
        'all_reduce\n  File "/x/train.py", line 40 in step\n'
    )
    stuck = 'Thread 0x1 (most recent call first):\n  File "/x/data.py", line 9 in load_batch\n'
    evidence = [
        HangEvidence(rank=r, hung=True, node="node-0", last_step=7, seconds_since_last_step=130.0, stacks=waiting)
        for r in (0, 1, 3)
    ] + [HangEvidence(rank=2, hung=True, node="node-0", last_step=7, seconds_since_last_step=131.0, stacks=stuck)]
    ranks = synthetic_job(JobShape(world_size=4))
    for r in ranks:
        r.status = RankStatus.HUNG
    d = diagnose(ranks, hang_evidence=evidence)
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.HANG)]
    assert d.verdict.startswith("Hang: ") and "rank 2 never reached it" in d.verdict


def test_errored_ranks_do_not_stop_the_diagnosis() -> None:
    ranks = synthetic_job(slow_rank=1, cause=Cause.COMPUTE, extra_us=20_000)
    ranks[6] = ranks[6].model_copy(update={"status": RankStatus.ERROR, "error": "truncated gzip"})
    d = diagnose(ranks)
    assert [s.rank for s in d.slow_ranks] == [1]
    assert any("could not be analysed" in s for s in d.next_steps)


def test_single_rank_has_nothing_to_compare() -> None:
    d = diagnose(synthetic_job(JobShape(world_size=1)))
    assert d.slow_ranks == [] and d.verdict.startswith("One rank analysed")


def test_no_analysable_rank() -> None:
    d = diagnose([])
    assert d.slow_ranks == [] and d.verdict.startswith("No rank could be analysed")


def test_bottlenecks_leave_waiting_out_and_communication_quotes_the_waits() -> None:
    """The top bottleneck is a job's own cost: a collective counts by its least time over the ranks (the last
    to arrive does not wait), and the communication table's wait is each rank's estimated wait shared out."""
    ranks = synthetic_job(JobShape(world_size=4), slow_rank=1, cause=Cause.HOST, extra_us=60_000)
    d = diagnose(ranks)
    comm = next(b for b in d.bottlenecks if b.category == "communication")
    least = min(f.bottleneck_ratio for r in ranks for f in r.top_functions if f.category == "communication")
    assert comm.bottleneck_ratio == pytest.approx(least)
    assert d.bottlenecks[0].category != "communication"
    (allreduce,) = d.communication
    assert allreduce.wait_us > 0
