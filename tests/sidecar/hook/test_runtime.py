"""The hook's state machine driven step by step in this process (torch.profiler runs for real)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
import torch

from stepscope_contract.wire import HookPhase, HookRequest, HookState, RankMeta
from stepscope_hook._runtime import Hook

pytestmark = pytest.mark.unit


def request(hook_dir: Path, capture_id: str, **kw: object) -> None:
    body = HookRequest.model_validate(
        {"captureId": capture_id, "steps": 2, "activities": ["cpu", "cuda"], "requestedAt": time.time(), **kw}
    )
    (hook_dir / "r.tmp").write_text(body.model_dump_json(by_alias=True))
    (hook_dir / "r.tmp").rename(hook_dir / "request.json")


def state(hook_dir: Path) -> HookState:
    return HookState.model_validate_json((hook_dir / "state" / "rank-0.json").read_bytes())


@pytest.fixture
def hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hook:
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    h = Hook(str(tmp_path), poll_seconds=0.0)
    yield h
    h.enabled = False


def test_capture_writes_contract_shaped_state_meta_and_exactly_n_steps(hook: Hook, tmp_path: Path) -> None:
    hook.on_step()
    assert state(tmp_path).phase is HookPhase.IDLE
    request(tmp_path, "cap-a", steps=3, skipSteps=2)
    phases = []
    for _ in range(8):
        hook.on_step()
        phases.append(state(tmp_path).phase.value)
    # seen at the first boundary, 2 whole steps skipped, 3 steps recorded
    assert phases == ["armed", "armed", "capturing", "capturing", "capturing", "written", "written", "written"]
    meta = RankMeta.model_validate_json((tmp_path / "captures/cap-a/rank-0/meta.json").read_bytes())
    assert meta.steps_captured == 3 and len(meta.step_durations_ms) == 3 and meta.device == "cpu"
    assert meta.torch_version == torch.__version__ and meta.cuda_version == torch.version.cuda  # None on CPU builds
    trace = json.loads(gzip.decompress((tmp_path / "captures/cap-a/rank-0/trace.pt.trace.json.gz").read_bytes()))
    names = [e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    assert sorted(names) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    assert trace["stepscope"]["captureId"] == "cap-a"
    # the same capture id is acted on once
    for _ in range(3):
        hook.on_step()
    assert state(tmp_path).phase is HookPhase.WRITTEN


def test_watchdog_dumps_stacks_when_no_step_comes(hook: Hook, tmp_path: Path) -> None:
    hook.on_step()  # registers and starts the watchdog
    request(tmp_path, "cap-hang", stepTimeoutSeconds=1)
    began = time.monotonic()
    while state(tmp_path).phase is not HookPhase.HUNG:
        assert time.monotonic() - began < 5, "no hang reported"
        time.sleep(0.05)
    stacks = (tmp_path / "captures/cap-hang/rank-0/stacks.txt").read_text()
    # the main thread (this test, stuck in its wait loop) first; the hook's own watchdog thread left out
    first = stacks.split("Thread ", 2)[1]
    assert "(MainThread)" in first and "test_watchdog_dumps_stacks_when_no_step_comes" in first
    assert "stepscope-watchdog" not in stacks and "_watch_once" not in stacks
    assert "faulthandler" not in stacks
    meta = RankMeta.model_validate_json((tmp_path / "captures/cap-hang/rank-0/meta.json").read_bytes())
    assert meta.hung and meta.seconds_since_last_step is not None and meta.seconds_since_last_step >= 1
    # the same text in state and meta, without the seconds (they differ per rank; meta has them)
    assert state(tmp_path).message == meta.error == "no step boundary within stepTimeoutSeconds (1 s)"
    assert meta.dump_reason == "hang" and meta.flight_recorder  # no process group here: it says why


def test_abort_drops_an_armed_capture(hook: Hook, tmp_path: Path) -> None:
    hook.on_step()
    request(tmp_path, "cap-ab", skipSteps=1000)
    hook.on_step()
    assert state(tmp_path).phase is HookPhase.ARMED
    request(tmp_path, "cap-ab", abort=True, skipSteps=1000)
    hook.on_step()
    assert state(tmp_path).phase is HookPhase.ABORTED and hook.active is None


def test_an_internal_error_disables_the_hook_and_never_reaches_training(hook: Hook, tmp_path: Path) -> None:
    hook.on_step()
    request(tmp_path, "cap-err", steps=1, skipSteps=0)

    def boom(*_: object) -> None:
        raise RuntimeError("disk on fire")

    hook._start = boom  # type: ignore[method-assign]
    hook.on_step()  # must not raise
    s = state(tmp_path)
    assert s.phase is HookPhase.DISABLED and "disk on fire" in s.message and s.capture_id == "cap-err"
    hook.on_step()
    assert not hook.enabled


def test_explicit_steps_take_over_from_the_optimizer(hook: Hook) -> None:
    hook.optimizer_hook(None, (), {})
    hook.explicit_step()
    hook.optimizer_hook(None, (), {})
    assert hook.step_count == 2
