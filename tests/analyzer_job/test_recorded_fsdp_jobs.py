"""The analyzer on real FSDP2 jobs recorded with plain torch.profiler (fixtures/fsdp_jobs, see its README): the
fast rank's wait inside FSDP2's collective regions is waiting, not backward work, the slow worker is named, a rank
that prepares its batch in plain Python is named for its host time, and a healthy job has no slow rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_contract.report import Cause
from stepscope_testing.local_analysis import analyse_folder

pytestmark = pytest.mark.unit

JOB = Path(__file__).parent / "fixtures" / "fsdp_jobs" / "cpu-fsdp2-2r-slow-worker-3x"


def test_the_wait_in_fsdp2_regions_is_not_backward_work_and_the_slow_worker_is_named() -> None:
    report = analyse_folder(JOB)
    fast, slow = (next(r for r in report.ranks if r.rank == k).phases for k in (0, 1))
    assert fast is not None and slow is not None
    assert slow.backward > 1.5 * fast.backward  # 3x the tokens: rank 0's backward is its own work only
    assert fast.communication_wait > slow.communication_wait  # rank 0 waits for rank 1
    assert [(s.rank, s.cause) for s in report.diagnosis.slow_ranks] == [(1, Cause.COMPUTE)], report.diagnosis.verdict


def test_four_fsdp2_ranks_wait_for_the_slow_one_in_their_all_gathers() -> None:
    """4 ranks, rank 2 over 2x the tokens, recorded on a busy machine: its excess is a small part of a step spent
    mostly in collectives; the others' matched all_gathers end when rank 2 arrives."""
    report = analyse_folder(JOB.parent / "cpu-fsdp2-4r-slow-worker-2x")
    d = report.diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.COMPUTE)], d.verdict
    waiters = d.slow_ranks[0].waiters
    assert {w.rank for w in waiters} == {0, 1, 3} and all(w.via.startswith("allgather in ") for w in waiters)
    assert all(w.waits_for[0].rank == 2 for w in d.waits if w.rank != 2)  # each waits for rank 2 most


def test_a_rank_preparing_its_batch_in_python_is_a_host_straggler() -> None:
    """4 ranks, rank 1 spending 40 ms of CPU time per step in plain Python before its forward, outside any op."""
    d = analyse_folder(JOB.parent / "cpu-fsdp2-4r-slow-host-40ms").diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(1, Cause.HOST)], d.verdict
    assert {w.rank for w in d.slow_ranks[0].waiters} == {0, 2, 3}


def test_a_healthy_fsdp2_job_has_no_slow_rank() -> None:
    d = analyse_folder(JOB.parent / "cpu-fsdp2-4r-balanced").diagnosis
    assert not d.slow_ranks and not d.findings and d.verdict.startswith("No slow rank"), d.verdict


def test_fsdp2_with_tensor_parallelism_reads_its_2d_mesh_and_names_the_host_straggler() -> None:
    """FSDP2 over "dp_shard" with DTensor TP over "tp" (2 x 2): the layout is the mesh's, a healthy job has no slow
    rank, and rank 2's 40 ms of plain Python per step is named host, its TP waits not counted as anyone's work."""
    healthy = analyse_folder(JOB.parent / "cpu-fsdp2-tp2-4r-balanced").diagnosis
    assert healthy.layout is not None and healthy.layout.summary.startswith("4 ranks = 2 replicas x 2 TP ranks")
    assert not healthy.slow_ranks and not healthy.findings, healthy.verdict
    d = analyse_folder(JOB.parent / "cpu-fsdp2-tp2-4r-slow-host-40ms").diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.HOST)], d.verdict
