from __future__ import annotations

import time

import pytest

from stepscope_contract.wire import CaptureState, HookPhase, HookState
from stepscope_sidecar.hook_states import final_state, hook_done, live_state, rank_outcome

pytestmark = pytest.mark.unit


def st(rank: int, phase: HookPhase, capture_id: str | None = "c1") -> HookState:
    return HookState(rank=rank, pid=1, phase=phase, capture_id=capture_id, updated_at=time.time())


def test_hook_done_only_for_this_capture() -> None:
    assert hook_done(st(0, HookPhase.WRITTEN), "c1")
    assert not hook_done(st(0, HookPhase.WRITTEN, "c0"), "c1")
    assert not hook_done(st(0, HookPhase.CAPTURING), "c1")
    assert hook_done(st(0, HookPhase.DISABLED), "c1")


def test_live_state() -> None:
    assert live_state([st(0, HookPhase.IDLE, None)], "c1") is CaptureState.ARMED
    assert live_state([st(0, HookPhase.CAPTURING), st(1, HookPhase.ARMED)], "c1") is CaptureState.CAPTURING
    assert live_state([st(0, HookPhase.WRITTEN), st(1, HookPhase.WRITTEN)], "c1") is CaptureState.WRITTEN


def test_rank_outcome_and_final_state() -> None:
    assert rank_outcome(st(0, HookPhase.WRITTEN)) is CaptureState.UPLOADED
    assert rank_outcome(st(0, HookPhase.HUNG)) is CaptureState.HUNG
    assert rank_outcome(st(0, HookPhase.DISABLED)) is CaptureState.FAILED
    assert rank_outcome(None) is CaptureState.FAILED
    up, hung, failed = CaptureState.UPLOADED, CaptureState.HUNG, CaptureState.FAILED
    assert final_state({0: up, 1: up}, aborted=False) is up
    assert final_state({0: up, 1: hung}, aborted=False) is hung
    assert final_state({0: hung, 1: failed}, aborted=False) is failed
    assert final_state({}, aborted=False) is failed
    assert final_state({0: up}, aborted=True) is CaptureState.ABORTED
