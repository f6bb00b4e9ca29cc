"""Who waits for whom, from matched calls: collectives within their process group (the member whose call is
shortest arrived last), receives paired with their senders' sends, peers from the trace or from the pipeline's
direction; and, end to end on GPU 3D jobs of the timing model, the waits follow the pipeline to the slow GPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.waits import matched_waits, waiters_of
from stepscope_contract.report import CommCalls, ProcessGroup, RankReport
from stepscope_testing.corpus import gpu_pipelines
from stepscope_testing.gpu_pipeline_jobs import GpuPipeJob, write_job
from stepscope_testing.local_analysis import analyse_folder

pytestmark = pytest.mark.unit

Call = tuple[str, int, int, int, float]  # op, group index (-1: none), peer (-1: none), step, duration µs


def _rank(
    rank: int,
    calls: list[Call],
    *,
    groups: tuple[str, ...] = (),
    toward: tuple[int, ...] = (),
    starts: tuple[float, ...] = (),
) -> RankReport:
    ops = sorted({c[0] for c in calls})
    comm = CommCalls(
        ops=ops,
        groups=list(groups),
        op_index=[ops.index(c[0]) for c in calls],
        group_index=[c[1] for c in calls],
        peer=[c[2] for c in calls],
        step=[c[3] for c in calls],
        dur_us=[c[4] for c in calls],
        start_us=list(starts),
        toward=list(toward),
    )
    members = [ProcessGroup(name=g.split(":")[0], desc=g.split(":")[1], ranks=[0, 1, 2]) for g in groups]
    return RankReport(rank=rank, comm_calls=comm, process_groups=members)


def test_in_a_collective_the_others_wait_for_the_member_that_arrives_last() -> None:
    g = ("1:dp",)
    ranks = [
        _rank(0, [("allreduce", 0, -1, s, 900.0) for s in (1, 2)], groups=g),
        _rank(1, [("allreduce", 0, -1, s, 100.0) for s in (1, 2)], groups=g),  # arrives last: its call is shortest
        _rank(2, [("allreduce", 0, -1, s, 600.0) for s in (1, 2)], groups=g),
    ]
    waits = {w.rank: w for w in matched_waits(ranks, None)}
    assert set(waits) == {0, 2}
    assert [(f.rank, f.us_per_step, f.via, f.calls) for f in waits[0].waits_for] == [(1, 800.0, "allreduce in 1:dp", 2)]
    assert waits[2].waits_for[0].us_per_step == 500.0
    assert [(w.rank, w.us_per_step) for w in waiters_of(list(waits.values()), 1)] == [(0, 800.0), (2, 500.0)]


def test_waits_in_calls_that_run_at_once_count_once() -> None:
    """gloo runs DDP's bucket all_reduces at once: rank 0 waits in both for rank 1 over the same 800 µs."""
    g = ("1:dp",)
    a = _rank(0, [("allreduce", 0, -1, 1, 900.0), ("allreduce", 0, -1, 1, 900.0)], groups=g, starts=(0.0, 50.0))
    b = _rank(1, [("allreduce", 0, -1, 1, 100.0), ("allreduce", 0, -1, 1, 100.0)], groups=g, starts=(800.0, 850.0))
    (waits,) = matched_waits([a, b], None)
    assert waits.waits_for[0].calls == 2
    assert waits.waits_for[0].us_per_step == waits.waited_us_per_step == 850.0  # [0, 800) and [50, 850): 850 µs


def test_calls_are_matched_by_their_place_in_the_step_not_across_steps() -> None:
    g = ("1:dp",)
    a = _rank(0, [("allreduce", 0, -1, 1, 500.0), ("allreduce", 0, -1, 1, 100.0)], groups=g)
    b = _rank(1, [("allreduce", 0, -1, 1, 100.0), ("allreduce", 0, -1, 1, 300.0)], groups=g)
    waits = {w.rank: w for w in matched_waits([a, b], None)}
    # the first call: 0 waited 400 for 1; the second: 1 waited 200 for 0
    assert waits[0].waits_for[0].rank == 1 and waits[0].waits_for[0].us_per_step == 400.0
    assert waits[1].waits_for[0].rank == 0 and waits[1].waits_for[0].us_per_step == 200.0


def test_a_receive_waits_for_its_sender_only_when_the_send_is_there() -> None:
    sender = _rank(0, [("send", -1, 1, s, 10.0) for s in (1, 2, 3)])
    receiver = _rank(1, [("recv", -1, 0, 1, 50.0), ("recv", -1, 0, 2, 3050.0), ("recv", -1, 0, 3, 1050.0)])
    waits = matched_waits([sender, receiver], None)
    assert [(w.rank, w.waits_for[0].rank, w.waits_for[0].via) for w in waits] == [(1, 0, "recv from it")]
    assert waits[0].waits_for[0].us_per_step == pytest.approx((3000.0 + 1000.0) / 3, abs=0.1)  # beyond the transfer
    lone = _rank(1, [("recv", -1, 0, 1, 50.0), ("recv", -1, 0, 2, 3050.0)])
    assert matched_waits([lone], None) == []  # no send recorded: not counted


def _pipeline(stages: int) -> Layout:
    return Layout(
        stages=stages,
        replicas=1,
        tp=1,
        stage={r: r for r in range(stages)},
        replica={r: 0 for r in range(stages)},
        tp_pos={r: 0 for r in range(stages)},
        source="process groups",
    )


def test_without_recorded_peers_the_pipeline_direction_names_the_other_end() -> None:
    """Stage 1 of 3 receives activations from stage 0 (toward -1) and gradients from stage 2 (toward +1)."""
    first = _rank(0, [("send", -1, -1, 1, 10.0), ("send", -1, -1, 2, 10.0)])
    middle = _rank(
        1,
        [("recv", -1, -1, 1, 20.0), ("recv", -1, -1, 1, 4020.0), ("recv", -1, -1, 2, 20.0), ("recv", -1, -1, 2, 20.0)],
        toward=(-1, 1, -1, 1),
    )
    last = _rank(2, [("send", -1, -1, 1, 10.0), ("send", -1, -1, 2, 10.0)])
    waits = matched_waits([first, middle, last], _pipeline(3))
    assert [(w.rank, [(f.rank, f.us_per_step) for f in w.waits_for]) for w in waits] == [(1, [(2, 2000.0)])]


def test_calls_that_cannot_be_matched_one_to_one_are_left_out() -> None:
    g = ("1:dp",)
    # rank 1 issued one all_reduce more in step 1: the k-th calls need not be one call
    a = _rank(0, [("allreduce", 0, -1, 1, 900.0), ("allreduce", 0, -1, 2, 900.0)], groups=g)
    b = _rank(
        1, [("allreduce", 0, -1, 1, 100.0), ("allreduce", 0, -1, 1, 100.0), ("allreduce", 0, -1, 2, 100.0)], groups=g
    )
    (only,) = matched_waits([a, b], None)
    assert only.rank == 0 and only.waits_for[0].calls == 1 and only.waits_for[0].us_per_step == 400.0  # step 2 only
    # SendRecv kernels without args (either direction) and ungrouped calls in a job with TP groups are not matched
    kernels = [_rank(r, [("sendrecv", -1, -1, 1, 100.0 + 800.0 * r)]) for r in (0, 1)]
    assert matched_waits(kernels, None) == []
    tp = Layout(
        stages=1, replicas=2, tp=2, stage={r: 0 for r in range(4)}, replica={r: r // 2 for r in range(4)},
        tp_pos={r: r % 2 for r in range(4)}, source="process groups",
    )  # fmt: skip
    ungrouped = [_rank(r, [("allreduce", -1, -1, 1, 100.0 + 800.0 * (r == 0))]) for r in range(4)]
    assert matched_waits(ungrouped, tp) == []
    assert matched_waits(ungrouped, None) != []  # without TP groups they are the data-parallel peers' calls


GPU_JOBS = {s.name: s.job for s in gpu_pipelines() if isinstance(s.job, GpuPipeJob)}


def test_on_a_3d_job_the_waits_follow_the_pipeline_to_the_slow_gpu(tmp_path: Path) -> None:
    """pp4 x dp4, rank 13 (stage 3, replica 1) slow: its data-parallel peers wait for it in the gradients'
    all_reduce, the previous stage of its replica (rank 9) in the receive of its gradients."""
    job = GPU_JOBS["gpu-pp4dp4-slow-worker-1.3x"]
    d = analyse_folder(write_job(job, tmp_path / "job")).diagnosis
    assert [s.rank for s in d.slow_ranks] == [13]
    waiters = {w.rank: w.via for w in d.slow_ranks[0].waiters}
    assert waiters == {12: "allreduce in dp12:mesh_dp", 14: "allreduce in dp12:mesh_dp",
                       15: "allreduce in dp12:mesh_dp", 9: "recv from it"}  # fmt: skip
    said = re.search(r"ranks (\d+), (\d+) and (\d+) wait for it \(", d.verdict)
    assert said is not None and {int(x) for x in said.groups()} == {12, 14, 15}, d.verdict
    nine = next(w for w in d.waits if w.rank == 9)
    assert nine.waits_for[0].rank == 13
    # a balanced job of the same shape: every rank's largest wait is the schedule's, along its own replica
    balanced = analyse_folder(write_job(GPU_JOBS["gpu-pp4dp2-balanced-0"], tmp_path / "balanced")).diagnosis
    layout = {x.rank: (x.stage, x.replica) for x in balanced.layout.ranks} if balanced.layout else {}
    for w in balanced.waits:
        top = w.waits_for[0]
        assert layout[top.rank][1] == layout[w.rank][1] and top.via == "recv from it", w


def test_a_tp_straggler_is_waited_for_in_its_tensor_parallel_group(tmp_path: Path) -> None:
    job = GPU_JOBS["gpu-pp2dp2tp2-tp-straggler"]
    d = analyse_folder(write_job(job, tmp_path / "job")).diagnosis
    (slow,) = d.slow_ranks
    vias = {w.rank: w.via for w in slow.waiters}
    assert vias[4] == "allreduce in tp4:mesh_tp" and vias[1] == "recv from it", vias


def test_row_codes_are_equal_exactly_where_the_rows_are_even_beyond_one_int64() -> None:
    import numpy as np

    from stepscope_analyzer.diagnosis.waits import _codes

    rng = np.random.default_rng(0)
    small = [rng.integers(0, 3, 200) for _ in range(3)]
    wide = [np.arange(200) * 7_919 + k for k in range(5)] + [rng.integers(0, 2, 200)]  # 200^5 * 2 > 2^62
    for columns in (small, wide):
        codes = _codes(*columns)
        rows = [tuple(int(c[i]) for c in columns) for i in range(200)]
        for i in range(0, 200, 7):
            for j in range(0, 200, 11):
                assert (codes[i] == codes[j]) == (rows[i] == rows[j])


def test_a_real_data_parallel_job_waits_no_longer_than_its_steps() -> None:
    """The compute demo session (4 gloo ranks, rank 2 computes extra): the others wait for rank 2 in DDP's bucket
    all_reduces, which gloo runs at once; each waits for it less than its step lasts."""
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "demo_sessions" / "compute"
    report = analyse_folder(demo)
    d = report.diagnosis
    (slow,) = d.slow_ranks
    assert slow.rank == 2 and {w.rank for w in slow.waiters} == {0, 1, 3}
    steps = {r.rank: r.per_step.step_median_us for r in report.ranks if r.per_step is not None}
    for w in d.waits:
        assert 0 < w.waited_us_per_step < steps[w.rank], (w, steps[w.rank])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["allreduce", "send", "recv", "sendrecv"]), st.integers(-1, 0),
                          st.integers(-1, 3), st.integers(0, 2), st.floats(0.0, 1e4)), max_size=12),
       st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True))  # fmt: skip
def test_any_calls_give_waits_that_are_times(calls: list[Call], ranks: list[int]) -> None:
    """Whatever the ranks' calls (well formed, as the contract admits them), the matching gives waits of rank to
    rank, no longer than the calls waited in."""
    reports = [_rank(r, [c for i, c in enumerate(calls) if i % len(ranks) == k], groups=("1:dp",))
               for k, r in enumerate(ranks)]  # fmt: skip
    longest = sum(c[4] for c in calls)
    for w in matched_waits(reports, _pipeline(4)):
        assert w.rank in ranks and 0 < w.waited_us_per_step <= longest
        assert all(f.rank in ranks and f.rank != w.rank and 0 < f.us_per_step <= longest for f in w.waits_for)
