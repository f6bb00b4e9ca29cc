"""The hook's step telemetry, driven in this process and read back with the sidecar's reader: the layout copy equals
the contract's, each step's duration, backward and data wait land in the ring, captures mark their steps (and the
export's), the ring wraps, the histogram counts every step, and the series is closed when the hook switches off."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

import stepscope_hook._telemetry as hook_telemetry
from stepscope_contract import step_telemetry as contract
from stepscope_contract.wire import HookRequest
from stepscope_hook._runtime import Hook
from stepscope_hook._telemetry import StepRecorder
from stepscope_sidecar.step_telemetry import parse_ring, read_rings

pytestmark = pytest.mark.unit

LAYOUT = (
    "TELEMETRY_DIR",
    "RING_SUFFIX",
    "MAGIC",
    "VERSION",
    "HEADER_SIZE",
    "CAPACITY",
    "HISTOGRAM_BOUNDS",
    "COUNTERS_OFFSET",
    "CLOSED_OFFSET",
    "BUCKETS_OFFSET",
    "SLOT_SIZE",
    "FLAG_PROFILED",
)


def test_the_hooks_copy_of_the_layout_is_the_contracts() -> None:
    for name in LAYOUT:
        assert getattr(hook_telemetry, name) == getattr(contract, name), name
    for name in ("HEADER_FIXED", "COUNTERS", "CLOSED", "BUCKET", "SLOT"):
        assert getattr(hook_telemetry, name).format == getattr(contract, name).format, name


@pytest.fixture
def hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hook:
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "STEPSCOPE_STEP_TELEMETRY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    h = Hook(str(tmp_path), poll_seconds=0.0)
    yield h
    h.enabled = False


def test_each_step_is_recorded_with_its_duration_and_the_histogram_counts_it(hook: Hook, tmp_path: Path) -> None:
    hook.on_step()  # the first boundary opens the ring: no step has ended yet
    assert (tmp_path / "telemetry" / "rank-3.steps").is_file()
    for pause in (0.02, 0.05, 0.002):
        time.sleep(pause)
        hook.on_step()
    (ring,) = read_rings(tmp_path, 100)
    assert (ring.rank, ring.world_size, ring.count, ring.closed) == (3, 4, 3, False)
    assert [s.seq for s in ring.steps] == [0, 1, 2]
    durations = [s.duration for s in ring.steps]
    assert durations[0] >= 0.02 and durations[1] >= 0.05 and durations[2] >= 0.002, durations
    assert ring.duration_sum == pytest.approx(sum(durations), rel=1e-5)
    assert sum(ring.buckets) == 3
    assert ring.buckets[contract.HISTOGRAM_BOUNDS.index(0.1)] >= 1  # the 50 ms step is in (0.05, 0.1]
    assert abs(ring.last_step - time.time()) < 5 and ring.steps[-1].ended == pytest.approx(ring.last_step, abs=1e-3)
    assert not any(s.profiled for s in ring.steps)


def test_backward_time_is_measured_and_own_time_is_the_rest(hook: Hook, tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    hook.on_step()  # registers: the timing of backward starts here
    for _ in range(3):
        time.sleep(0.03)  # host work outside backward: own time
        model(torch.randn(32, 64)).sum().backward()
        hook.on_step()
    steps = read_rings(tmp_path, 10)[0].steps
    assert all(s.backward > 0 for s in steps), steps
    assert all(s.own >= 0.03 and s.backward < s.duration for s in steps), steps
    assert getattr(torch.autograd.backward, "_stepscope_timed", False)  # Tensor.backward goes through it


def test_data_wait_is_the_time_in_dataloader_iterators(hook: Hook, tmp_path: Path) -> None:
    class Slow(torch.utils.data.Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int) -> torch.Tensor:
            time.sleep(0.01)
            return torch.zeros(2)

    hook.on_step()
    for _batch in torch.utils.data.DataLoader(Slow(), batch_size=2):
        hook.on_step()
    steps = read_rings(tmp_path, 10)[0].steps
    assert len(steps) == 4
    assert all(s.data_wait >= 0.018 for s in steps[1:]), steps  # two items of 10 ms per batch


def test_steps_around_a_capture_are_marked(hook: Hook, tmp_path: Path) -> None:
    hook.on_step()
    hook.on_step()
    body = HookRequest.model_validate(
        {"captureId": "cap-t", "steps": 2, "skipSteps": 0, "activities": ["cpu"], "requestedAt": time.time()}
    )
    (tmp_path / "request.json").write_text(body.model_dump_json(by_alias=True))
    for _ in range(6):
        hook.on_step()
    marks = [s.profiled for s in read_rings(tmp_path, 10)[0].steps]
    # the boundary that sees the request starts the profiler: 2 profiled steps, then the step that began with the
    # trace's export; the steps before and after are normal
    assert marks == [False, False, True, True, True, False, False], marks


def test_the_ring_wraps_and_a_rewritten_slot_is_never_taken_for_another_step(tmp_path: Path) -> None:
    recorder = StepRecorder(str(tmp_path), 0, 1, capacity=8)
    now = 100.0
    recorder.start(now)
    for i in range(20):
        now += 0.01 * (i + 1)
        recorder.record(now, profiled=False)
    data = Path(recorder.path).read_bytes()
    ring = parse_ring(data, 100)
    assert ring is not None and ring.count == 20
    assert [s.seq for s in ring.steps] == list(range(13, 20))  # capacity - 1 steps, the newest
    assert ring.steps[-1].duration == pytest.approx(0.2, rel=1e-5)
    # a slot half-rewritten by the next step: its step number no longer matches, so it is left out
    torn = bytearray(data)
    offset = contract.HEADER_SIZE + (19 % 8) * contract.SLOT_SIZE
    torn[offset : offset + 8] = (27).to_bytes(8, "little")
    again = parse_ring(bytes(torn), 100)
    assert again is not None and [s.seq for s in again.steps] == list(range(13, 19))


def test_a_hook_that_switches_off_closes_its_series(hook: Hook, tmp_path: Path) -> None:
    hook.on_step()
    hook.on_step()
    hook.disable("test")
    hook.on_step()  # nothing more is recorded
    (ring,) = read_rings(tmp_path, 10)
    assert ring.closed and ring.count == 1


def test_telemetry_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_STEP_TELEMETRY", "0")
    h = Hook(str(tmp_path), poll_seconds=0.0)
    h.on_step()
    h.on_step()
    h.enabled = False
    assert h.telemetry is None and not (tmp_path / "telemetry").exists()
