"""Pure state logic: a capture's overall state from its ranks' states."""

from __future__ import annotations

from stepscope_contract.wire import CaptureState, HookPhase, HookState

HOOK_TERMINAL = frozenset(
    {HookPhase.WRITTEN, HookPhase.HUNG, HookPhase.DUMPED, HookPhase.FAILED, HookPhase.ABORTED, HookPhase.DISABLED}
)


def hook_done(state: HookState, capture_id: str) -> bool:
    """This rank's hook has nothing more to do for the capture."""
    return state.capture_id == capture_id and state.phase in HOOK_TERMINAL


def rank_outcome(state: HookState | None) -> CaptureState:
    """What a rank's hook phase means for its upload: written (a trace) or dumped (stacks and Flight Recorder dump
    on demand) -> uploaded once stored, hung keeps its stacks and dump."""
    if state is None:
        return CaptureState.FAILED
    return {
        HookPhase.WRITTEN: CaptureState.UPLOADED,
        HookPhase.DUMPED: CaptureState.UPLOADED,
        HookPhase.HUNG: CaptureState.HUNG,
        HookPhase.ABORTED: CaptureState.ABORTED,
    }.get(state.phase, CaptureState.FAILED)


def live_state(states: list[HookState], capture_id: str) -> CaptureState:
    """The capture's state while hooks are working on it."""
    mine = [s for s in states if s.capture_id == capture_id]
    if any(s.phase is HookPhase.CAPTURING for s in mine):
        return CaptureState.CAPTURING
    if mine and all(s.phase in HOOK_TERMINAL for s in mine) and any(s.phase is HookPhase.WRITTEN for s in mine):
        return CaptureState.WRITTEN
    return CaptureState.ARMED


def final_state(outcomes: dict[int, CaptureState], aborted: bool) -> CaptureState:
    """The terminal state of the capture: aborted, else any failure, else any hang, else uploaded."""
    if aborted:
        return CaptureState.ABORTED
    values = set(outcomes.values())
    if not values or CaptureState.FAILED in values:
        return CaptureState.FAILED
    if CaptureState.HUNG in values:
        return CaptureState.HUNG
    if CaptureState.ABORTED in values:
        return CaptureState.ABORTED
    return CaptureState.UPLOADED
