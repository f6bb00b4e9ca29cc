"""A slow rank beside the median of the others: what takes longer, what runs more often, with counts per step."""

from __future__ import annotations

import pytest

from stepscope_analyzer.diagnosis.comparison import compare_rank, describe, per_step_entries, with_comparisons
from stepscope_contract.report import Bottleneck, Cause, Diagnosis, KernelStat, RankReport, SlowRank, StepStats

pytestmark = pytest.mark.unit

STEPS = 5
STEP_US = 100_000.0


def _kernel(name: str, per_step_us: float, per_step_count: int, kind: str = "COMPUTATION") -> KernelStat:
    total = per_step_us * STEPS
    count = per_step_count * STEPS
    return KernelStat(name=name, kernel_type=kind, count=count, sum_us=total, mean_us=total / count,
                      max_us=0, min_us=0, stddev=0)  # fmt: skip


def _fn(name: str, per_step_us: float, per_step_count: int, category: str = "cpu_op") -> Bottleneck:
    return Bottleneck(name=name, category=category, count=per_step_count * STEPS, total_us=per_step_us * STEPS)


def _rank(rank: int, kernels: list[KernelStat] | None = None, functions: list[Bottleneck] | None = None) -> RankReport:
    return RankReport(
        rank=rank,
        steps=StepStats(count=STEPS, median_us=STEP_US, mean_us=STEP_US),
        top_kernels=kernels or [],
        top_functions=functions or [],
        device="cuda" if kernels else "cpu",
    )


def _gpu_job(slow: int = 5, ratio: float = 1.35) -> list[RankReport]:
    ranks = []
    for r in range(8):
        gemm = 40_000.0 * (ratio if r == slow else 1.0 + 0.002 * r)
        ranks.append(
            _rank(r, kernels=[
                _kernel("sm80_xmma_gemm_f16f16_f16f32", gemm, 48),
                _kernel("elementwise_kernel<add>", 5_000.0, 96),
                _kernel("Memcpy HtoD (Pageable -> Device)", 1_000.0, 4, "MEMORY"),
                _kernel("ncclDevKernel_AllReduce_Sum_f16_RING_LL", 20_000.0 if r == slow else 34_000.0, 2,
                        "COMMUNICATION"),
            ])
        )  # fmt: skip
    return ranks


def test_a_gpu_rank_whose_gemm_takes_longer_with_the_same_count() -> None:
    ranks = _gpu_job()
    rows = compare_rank(ranks[5], [r for r in ranks if r.rank != 5], STEP_US)
    top = rows[0]
    assert top.name == "sm80_xmma_gemm_f16f16_f16f32" and top.category == "kernel"
    assert top.count == top.baseline_count == 48
    assert top.ratio is not None and 1.33 < top.ratio < 1.36
    assert top.summary.startswith("1.3") and top.summary.endswith("x longer, same count")
    assert all("nccl" not in r.name for r in rows)  # collectives: the others' time there is waiting
    assert [r.name for r in rows] == ["sm80_xmma_gemm_f16f16_f16f32"]  # nothing else differs


def test_a_cpu_rank_that_runs_extra_copies() -> None:
    ranks = []
    for r in range(4):
        copies = 24 if r == 0 else 16
        ranks.append(_rank(r, functions=[
            _fn("aten::copy_", copies * 50.0, copies),
            _fn("aten::addmm", 30_000.0, 12),
            _fn("load_batch", 9_000.0 if r == 0 else 1_000.0, 1, "user_annotation"),
            _fn("gloo:all_reduce", 5_000.0, 2, "communication"),
        ]))  # fmt: skip
    rows = compare_rank(ranks[0], ranks[1:], STEP_US)
    by_name = {r.name: r for r in rows}
    assert set(by_name) == {"aten::copy_", "load_batch"}
    assert rows[0].name == "load_batch" and rows[0].summary == "9.00x longer, same count"
    copy = by_name["aten::copy_"]
    assert (copy.count, copy.baseline_count) == (24, 16) and copy.summary == "8 extra per step, 1.50x longer"


def test_names_present_on_one_side_only() -> None:
    others = [_rank(r, functions=[_fn("aten::mm", 2_000.0, 4)]) for r in range(1, 4)]
    mine = _rank(0, functions=[_fn("aten::nonzero", 3_000.0, 2)])
    rows = {r.name: r for r in compare_rank(mine, others, STEP_US)}
    assert rows["aten::nonzero"].summary == "only on this rank (2 per step)" and rows["aten::nonzero"].ratio is None
    assert rows["aten::mm"].summary == "not on this rank (4 per step on the others)"
    assert describe(50.0, 100.0, 3, 3) == "0.50x the time, same count"
    assert describe(50.0, 100.0, 1, 3) == "2 fewer per step, 0.50x the time"
    assert describe(100.0, 100.0, 1, 5) == "4 fewer per step, same time"


def test_cpu_entries_are_ops_and_functions_not_collectives() -> None:
    r = _rank(0, functions=[_fn("aten::mm", 10.0, 1), _fn("gloo:all_reduce", 10.0, 1, "communication"),
                            _fn("fwd", 10.0, 1, "python"), _fn("cudaLaunchKernel", 1.0, 3, "runtime")])  # fmt: skip
    assert {k for k, _ in per_step_entries(r)} == {"cpu_op", "python", "runtime"}


def test_the_diagnosis_carries_the_comparison_for_slow_ranks_only() -> None:
    ranks = _gpu_job()
    d = Diagnosis(
        verdict="x",
        median_step_us=STEP_US,
        slow_ranks=[SlowRank(rank=5, cause=Cause.COMPUTE, confidence=0.9), SlowRank(rank=9, cause=Cause.HANG,
                                                                                    confidence=0.9)],
    )  # fmt: skip
    out = with_comparisons(d, ranks)
    assert out.slow_ranks[0].comparison[0].name == "sm80_xmma_gemm_f16f16_f16f32"
    assert out.slow_ranks[1].comparison == []  # a hung rank has no steps to compare
    assert with_comparisons(d.model_copy(update={"slow_ranks": []}), ranks).slow_ranks == []


def test_regions_where_the_others_wait_for_the_slow_rank_are_left_out() -> None:
    """DDP's backward holds the all_reduce: the others spend longer there waiting; that is not this rank's cause."""
    ranks = [
        _rank(r, functions=[_fn("forward_backward", 22_000.0 if r == 2 else 88_000.0, 1, "user_annotation"),
                            _fn("load_batch", 61_000.0 if r == 2 else 150.0, 1, "user_annotation"),
                            _fn("aten::item", 100.0, 1 if r == 2 else 9)])
        for r in range(4)
    ]  # fmt: skip
    rows = {r.name: r for r in compare_rank(ranks[2], [r for r in ranks if r.rank != 2], STEP_US)}
    assert set(rows) == {"load_batch", "aten::item"}  # fewer calls still count: the count differs
    assert rows["aten::item"].summary == "8 fewer per step, same time"
