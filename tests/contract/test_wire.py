import pytest

from stepscope_contract.session import Activity, CaptureSpec
from stepscope_contract.wire import CaptureOptions, CaptureState, HookRequest

pytestmark = pytest.mark.unit


def test_options_from_spec_and_hook_request_carry_every_field() -> None:
    spec = CaptureSpec(
        steps=7,
        skip_steps=3,
        activities=[Activity.CPU],
        record_shapes=True,
        with_stack=True,
        profile_memory=True,
        step_timeout_seconds=9,
        timeout_seconds=99,
    )
    options = CaptureOptions.from_spec(spec)
    assert (options.steps, options.skip_steps, options.timeout_seconds, options.step_timeout_seconds) == (7, 3, 99, 9)
    hook = HookRequest.from_options("cap-1", options, requested_at=5.0)
    assert hook.wire() == {
        "captureId": "cap-1",
        "steps": 7,
        "skipSteps": 3,
        "activities": ["cpu"],
        "recordShapes": True,
        "withStack": True,
        "profileMemory": True,
        "stepTimeoutSeconds": 9.0,
        "dumpOnly": False,
        "abort": False,
        "requestedAt": 5.0,
    }
    dump = HookRequest.from_options("cap-2", options.model_copy(update={"dump_only": True}), requested_at=6.0)
    assert dump.dump_only is True


def test_terminal_capture_states() -> None:
    assert {s for s in CaptureState if s.terminal} == {
        CaptureState.UPLOADED,
        CaptureState.HUNG,
        CaptureState.FAILED,
        CaptureState.ABORTED,
    }
