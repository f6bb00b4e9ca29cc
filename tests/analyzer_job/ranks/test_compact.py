"""Summaries compacted for the reduce keep every value: they serialise byte for byte as before, in well under half
the memory when a job's ranks share their names; a shared field set cannot leak a field from one model to another."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from stepscope_analyzer.ranks.compact import Compactor
from stepscope_analyzer.ranks.node_summaries import summarise_trace
from stepscope_contract.report import Bottleneck, KernelStat, RankReport

FIXTURES = Path(__file__).parents[1] / "fixtures"
HTA = FIXTURES / "hta" / "sampled_128rank_rank0.json.gz"  # a GPU rank of HTA's public test data


def _summary_json() -> bytes:
    summary = summarise_trace(HTA.read_bytes(), 0, 50).summary
    assert summary is not None
    assert summary.top_kernels and summary.top_functions, "the tests need a GPU trace: kernels and CPU functions"
    return summary.model_dump_json().encode()


def test_a_compacted_summary_serialises_as_before() -> None:
    data = _summary_json()
    compactor = Compactor()
    first = compactor.compact(RankReport.model_validate_json(data))
    second = compactor.compact(RankReport.model_validate_json(data))
    assert first.model_dump_json().encode() == data
    assert second.model_dump_json().encode() == data
    plain = RankReport.model_validate_json(data)
    assert second.model_dump(exclude_unset=True) == plain.model_dump(exclude_unset=True)
    assert first.top_kernels and first.top_functions
    assert all(a.name is b.name for a, b in zip(first.top_kernels, second.top_kernels, strict=True))  # one string
    assert all(a.name is b.name for a, b in zip(first.top_functions, second.top_functions, strict=True))


def test_compacted_summaries_take_well_under_half_the_memory() -> None:
    data = _summary_json()

    def held(compactor: Compactor | None) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            kept = []
            for _ in range(40):
                summary = RankReport.model_validate_json(data)
                kept.append(compactor.compact(summary) if compactor else summary)
            gc.collect()
            return tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()

    plain, compacted = held(None), held(Compactor())
    assert compacted < 0.5 * plain, (plain, compacted)


def test_a_field_set_on_one_model_is_not_set_on_another() -> None:
    compactor = Compactor()
    full = [compactor.compact(KernelStat(name="k", kernel_type="COMPUTATION", count=1, sum_us=1.0, mean_us=1.0,
                                         max_us=1.0, min_us=1.0, stddev=0.0)) for _ in range(2)]  # fmt: skip
    assert full[0].model_fields_set is full[1].model_fields_set  # every field set: one shared set
    partial = [compactor.compact(Bottleneck(name="f", category="cpu_op")) for _ in range(2)]
    assert partial[0].model_fields_set is not partial[1].model_fields_set  # not every field set: its own
    partial[0].count = 3
    assert "count" in partial[0].model_fields_set
    assert "count" not in partial[1].model_fields_set
    full[0].count = 2  # already in the shared set: nothing changes for the other
    assert full[1].count == 1
    assert full[1].model_fields_set == set(KernelStat.model_fields)


def test_the_ranks_of_an_analysis_share_their_names() -> None:
    from stepscope_analyzer.ranks.pipeline import discover, summarize_all
    from stepscope_analyzer.ranks.storage_io import LocalStore, location_of

    folder = FIXTURES / "cpu_jobs" / "cpu-balanced-2r-transformer-40"
    store = LocalStore()
    outcomes = summarize_all(store, discover(store, location_of(str(folder))), workers=1)
    first, second = (o.summary for o in outcomes if o.skipped is None)
    shared = {f.name for f in first.top_functions} & {f.name for f in second.top_functions}
    assert shared
    by_name = {f.name: f.name for f in first.top_functions}
    assert all(by_name[f.name] is f.name for f in second.top_functions if f.name in shared)
