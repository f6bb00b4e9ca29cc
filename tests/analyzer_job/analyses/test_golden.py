"""Every HTA test trace in fixtures/hta matches HTA 0.5's golden outputs on it (within 1% per rank)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from stepscope_analyzer.analyses import summarize_trace
from stepscope_contract.report import RankReport

pytestmark = pytest.mark.unit

TRACES = [
    "nccl_16rank_rank0",
    "nccl_2rank_rank0",
    "nccl_2rank_rank1_large",
    "nccl_8rank_rank3",
    "resnet_1rank_rank0",
    "sampled_128rank_rank0",
    "sampled_128rank_rank1",
]
_CACHE: dict[str, RankReport] = {}


def _close(ours: float, golden: float, rel: float = 0.01, abs_tol: float = 0.01) -> bool:
    return math.isclose(ours, golden, rel_tol=rel, abs_tol=abs_tol)


def _report(hta_traces: Path, trace: str) -> RankReport:
    if trace not in _CACHE:
        path = next(hta_traces.glob(f"{trace}*.json.gz"))
        _CACHE[trace] = summarize_trace(path, top_n=10**6)
    return _CACHE[trace]


def _rows(hta_traces: Path, trace: str, name: str) -> list[dict[str, str]]:
    with (hta_traces / "golden" / trace / name).open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("trace", TRACES)
def test_temporal_breakdown_matches_hta(hta_traces: Path, trace: str) -> None:
    report = _report(hta_traces, trace)
    (golden,) = _rows(hta_traces, trace, "temporal_breakdown.csv")
    assert report.rank == int(golden["rank"])
    assert report.device == "cuda"
    for ours, col in [
        (report.idle_time, "idle_time(us)"),
        (report.compute_time, "compute_time(us)"),
        (report.non_compute_time, "non_compute_time(us)"),
        (report.kernel_time, "kernel_time(us)"),
        (report.idle_time_pctg, "idle_time_pctg"),
        (report.compute_time_pctg, "compute_time_pctg"),
        (report.non_compute_time_pctg, "non_compute_time_pctg"),
    ]:
        assert _close(ours, float(golden[col])), (col, ours, golden[col])


@pytest.mark.parametrize("trace", TRACES)
def test_comm_comp_overlap_matches_hta(hta_traces: Path, trace: str) -> None:
    report = _report(hta_traces, trace)
    (golden,) = _rows(hta_traces, trace, "comm_comp_overlap.csv")
    value = golden["comp_comm_overlap_pctg"]
    if value == "":  # HTA: NaN when there are no communication kernels
        assert report.communication_time == 0.0
        assert report.comp_comm_overlap_pctg == 0.0
    else:
        assert report.communication_time > 0
        assert _close(report.comp_comm_overlap_pctg, float(value)), (report.comp_comm_overlap_pctg, value)


@pytest.mark.parametrize("trace", TRACES)
def test_kernel_breakdown_matches_hta(hta_traces: Path, trace: str) -> None:
    report = _report(hta_traces, trace)
    ours = {(k.name, k.kernel_type): k for k in report.top_kernels}
    golden = _rows(hta_traces, trace, "gpu_kernel_breakdown_all_kernels.csv")
    assert len(ours) == len(golden)
    for row in golden:
        k = ours[(row["name"], row["kernel_type"])]
        mean = float(row["mean (us)"])
        assert _close(k.sum_us, float(row["sum (us)"]))
        assert _close(k.max_us, float(row["max (us)"]))
        assert _close(k.min_us, float(row["min (us)"]))
        assert _close(k.mean_us, mean)
        assert _close(k.stddev, float(row["stddev"]))
        assert k.count == round(float(row["sum (us)"]) / mean) if mean else k.sum_us == 0


@pytest.mark.parametrize("trace", TRACES)
def test_idle_time_breakdown_matches_hta(hta_traces: Path, trace: str) -> None:
    report = _report(hta_traces, trace)
    golden: dict[int, dict[str, float]] = {}
    for row in _rows(hta_traces, trace, "idle_time_breakdown.csv"):
        golden.setdefault(int(row["stream"]), {})[row["idle_category"]] = float(row["idle_time"])
    ours = {s.stream: s for s in report.idle_breakdown_by_stream}
    assert set(ours) == set(golden)
    for stream, cats in golden.items():
        for category in ("host_wait", "kernel_wait", "other"):
            assert _close(getattr(ours[stream], category), cats.get(category, 0.0)), (stream, category)
    # the rank's breakdown merges the streams: it adds up to the GPU's idle time, never beyond its window
    ib = report.idle_breakdown
    assert ib is not None
    assert _close(ib.host_wait + ib.kernel_wait + ib.other, report.idle_time)
    assert ib.host_wait + ib.kernel_wait + ib.other <= report.window_us


@pytest.mark.parametrize("trace", TRACES)
def test_rank_summary_is_consistent(hta_traces: Path, trace: str) -> None:
    r = _report(hta_traces, trace)
    assert r.steps.count >= 2 and r.steps.median_us > 0 and len(r.steps.durations_us) == r.steps.count
    assert r.gpu_utilization is not None and 0.0 < r.gpu_utilization <= 1.0
    assert math.isclose(r.gpu_utilization, 1 - r.idle_time / r.kernel_time)
    assert r.cpu_utilization is None  # CPU figures are for CPU-only ranks
    assert 0.0 <= r.exposed_communication_time <= r.communication_time + 1e-6
    assert all(0.0 <= b.bottleneck_ratio <= 1.0 for b in r.top_functions)
    assert {b.category for b in r.top_functions} >= {"kernel", "runtime", "cpu_op"}
    comm_kernels = sum(k.sum_us for k in r.top_kernels if k.kernel_type == "COMMUNICATION")
    # each collective's time is the union of its kernels (streams overlap): at most their sum, never the window
    assert sum(c.total_us for c in r.collectives) <= comm_kernels + 1e-6
    assert all(c.total_us <= r.window_us for c in r.collectives)
    RankReport.model_validate_json(r.model_dump_json())
    # phases follow the GPU and add up to the step (per step and on average); host time is there on GPU ranks
    assert r.phases is not None and len(r.step_phases) == r.steps.count
    for phases, step in zip(r.step_phases, r.steps.durations_us, strict=True):
        assert math.isclose(sum(phases.model_dump().values()), step, rel_tol=0.03)
    assert math.isclose(sum(r.phases.model_dump().values()), r.steps.mean_us, rel_tol=0.03)
    assert r.phases.forward > 0 and r.phases.backward > 0
    assert r.host_time > 0


def test_process_groups_come_from_record_param_comms(hta_traces: Path) -> None:
    r = _report(hta_traces, "nccl_2rank_rank0")
    assert {c.process_group for c in r.collectives} == {"0:default_pg"}
    assert r.world_size == 2
