import pytest
from pydantic import ValidationError

from stepscope_contract.session import Activity, CaptureSpec
from stepscope_contract.wire import CaptureOptions, CaptureRequest, CaptureState, HookRequest

pytestmark = pytest.mark.unit


def test_options_from_spec_and_hook_request_carry_every_field() -> None:
    spec = CaptureSpec(
        steps=7,
        skip_steps=3,
        activities=[Activity.CPU],
        record_shapes=True,
        with_stack=True,
        profile_memory=True,
        python_sampling=50,
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
        "pythonSampling": 50,
        "gpuMetrics": {"enabled": True, "intervalMs": 100},
        "timeoutSeconds": 99,
        "stepTimeoutSeconds": 9,
        "dumpOnly": False,
        "abort": False,
        "requestedAt": 5.0,
    }
    dump = HookRequest.from_options("cap-2", options.model_copy(update={"dump_only": True}), requested_at=6.0)
    assert dump.dump_only is True


def test_capture_options_are_declared_once() -> None:
    """The spec, the wire request and request.json share one declaration: same names, defaults and bounds."""
    spec_fields = CaptureSpec.model_fields
    for model in (CaptureOptions, HookRequest):
        for name, info in spec_fields.items():
            mine = model.model_fields[name]
            assert (mine.alias, mine.metadata, mine.get_default(call_default_factory=True)) == (
                info.alias,
                info.metadata,
                info.get_default(call_default_factory=True),
            ), (model.__name__, name)
    assert set(CaptureOptions.model_fields) - set(spec_fields) == {"dump_only"}  # a request's, never a session's
    assert set(HookRequest.model_fields) - set(spec_fields) == {"dump_only", "capture_id", "abort", "requested_at"}


def test_the_request_has_the_specs_defaults_and_bounds() -> None:
    """Once skipSteps defaulted to 1 in the spec and 0 on the wire, and timeoutSeconds allowed 10.. and 1.."""
    request = CaptureRequest.model_validate(
        {
            "captureId": "c-1",
            "session": {"namespace": "ns", "name": "s"},
            "options": {"steps": 2},
            "destination": {"sessionUri": "s3://b/p"},
        }
    )
    assert request.options.skip_steps == CaptureSpec().skip_steps == 1
    with pytest.raises(ValidationError, match=r"timeoutSeconds|timeout_seconds"):
        CaptureOptions.model_validate({"steps": 2, "timeoutSeconds": 3})
    with pytest.raises(ValidationError):
        CaptureSpec.model_validate({"steps": 2, "timeoutSeconds": 3})


def test_terminal_capture_states() -> None:
    assert {s for s in CaptureState if s.terminal} == {
        CaptureState.UPLOADED,
        CaptureState.HUNG,
        CaptureState.FAILED,
        CaptureState.ABORTED,
    }
