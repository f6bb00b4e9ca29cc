"""The sidecar's reading of ring files and its Prometheus step metrics: anything but a well-formed ring is skipped
(never an exception), the exposition parses with prometheus_client's own parser, the histogram is cumulative and
counts every step, labels are only rank, job_name and namespace, and a closed series has no stall gauge."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stepscope_contract import step_telemetry as layout
from stepscope_hook._telemetry import StepRecorder
from stepscope_sidecar.step_metrics import StepCollector
from stepscope_sidecar.step_telemetry import parse_ring, rank_steps, read_rings

pytestmark = pytest.mark.unit


def _ring(tmp_path: Path, rank: int, durations: list[float], profiled_at: int = -1) -> StepRecorder:
    recorder = StepRecorder(str(tmp_path), rank, 4, capacity=64)
    now = time.monotonic() - sum(durations) - 1.0
    recorder.start(now)
    for i, duration in enumerate(durations):
        now += duration
        recorder.backward_s = duration / 4
        recorder.record(now, profiled=i == profiled_at)
    return recorder


@given(st.binary(max_size=3000))
def test_garbage_is_never_a_ring(data: bytes) -> None:
    assert parse_ring(data, 10) is None or data.startswith(layout.MAGIC)


def test_truncated_or_foreign_files_are_skipped(tmp_path: Path) -> None:
    good = _ring(tmp_path, 0, [0.01] * 5)
    data = Path(good.path).read_bytes()
    assert parse_ring(data[: layout.HEADER_SIZE + 10], 10) is None  # shorter than its capacity says
    assert parse_ring(b"XXXXXXXX" + data[8:], 10) is None
    huge = bytearray(data)
    huge[16:20] = (10**9).to_bytes(4, "little")  # a capacity no reader should believe
    assert parse_ring(bytes(huge), 10) is None
    (tmp_path / "telemetry" / "rank-1.steps").write_bytes(b"not a ring")
    (tmp_path / "telemetry" / "notes.txt").write_text("ignored")
    (tmp_path / "telemetry" / "rank-2.steps").write_bytes(data)  # claims rank 0: not rank 2's
    assert [r.rank for r in read_rings(tmp_path, 10)] == [0]


def test_the_wire_form_has_one_entry_per_step_and_the_stall_clock_of_this_host(tmp_path: Path) -> None:
    _ring(tmp_path, 0, [0.1, 0.2, 0.3], profiled_at=1)
    (ring,) = read_rings(tmp_path, 2)
    wire = rank_steps(ring)
    assert wire.steps_total == 3 and wire.duration_ms == [200.0, 300.0] and wire.profiled == [True, False]
    assert wire.backward_ms == [50.0, 75.0] and wire.own_ms() == [150.0, 225.0]
    assert wire.seconds_since_last_step is not None and 0.5 < wire.seconds_since_last_step < 60


def _exposition(tmp_path: Path) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(StepCollector(tmp_path, job="ddp-train", namespace="team-a", window=100))
    text = generate_latest(registry).decode()
    out: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        out[family.name] = [(s.name, s.labels, s.value) for s in family.samples]
    return out


def test_exposition_parses_with_prometheus_clients_parser(tmp_path: Path) -> None:
    _ring(tmp_path, 0, [0.004, 0.02, 0.02, 0.3])
    closed = _ring(tmp_path, 1, [0.02, 0.02, 0.02], profiled_at=0)
    closed.close()
    metrics = _exposition(tmp_path)
    assert set(metrics) == {
        "stepscope_step_duration_seconds",
        "stepscope_step_median_seconds",
        "stepscope_step_own_median_seconds",
        "stepscope_step_data_wait_median_seconds",
        "stepscope_steps_per_second",
        "stepscope_seconds_since_last_step",
    }
    for samples in metrics.values():
        for _, labels, _ in samples:
            assert set(labels) - {"le"} == {"rank", "job_name", "namespace"}, labels
            assert labels["job_name"] == "ddp-train" and labels["namespace"] == "team-a"
    histogram = metrics["stepscope_step_duration_seconds"]
    rank0 = {(name, labels.get("le")): value for name, labels, value in histogram if labels["rank"] == "0"}
    assert rank0[("stepscope_step_duration_seconds_count", None)] == 4
    assert rank0[("stepscope_step_duration_seconds_sum", None)] == pytest.approx(0.344, rel=1e-4)
    assert rank0[("stepscope_step_duration_seconds_bucket", "0.005")] == 1
    assert rank0[("stepscope_step_duration_seconds_bucket", "0.025")] == 3
    assert rank0[("stepscope_step_duration_seconds_bucket", "0.25")] == 3
    assert rank0[("stepscope_step_duration_seconds_bucket", "+Inf")] == 4
    buckets = [v for (name, le), v in rank0.items() if name.endswith("_bucket")]
    assert buckets == sorted(buckets)  # cumulative
    medians = {labels["rank"]: value for _, labels, value in metrics["stepscope_step_median_seconds"]}
    assert medians["0"] == pytest.approx(0.02, rel=1e-4) and medians["1"] == pytest.approx(0.02, rel=1e-4)
    own = {labels["rank"]: value for _, labels, value in metrics["stepscope_step_own_median_seconds"]}
    assert own["0"] == pytest.approx(0.015, rel=1e-3)
    since = {labels["rank"] for _, labels, _ in metrics["stepscope_seconds_since_last_step"]}
    assert since == {"0"}  # rank 1's process exited: no stall to report
    rate = {labels["rank"]: value for _, labels, value in metrics["stepscope_steps_per_second"]}
    assert rate["0"] == pytest.approx(4 / 0.344, rel=1e-3)
