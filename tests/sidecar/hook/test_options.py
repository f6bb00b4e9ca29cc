"""The hook's stdlib copy of the capture options (stepscope_hook._options) against their one declaration
(stepscope_contract: CaptureSpec, which the wire's CaptureOptions and request.json's HookRequest extend): same names,
defaults and bounds; and how the hook reads a request with them."""

from __future__ import annotations

from typing import Any

import annotated_types
import pytest

from stepscope_contract.session import CaptureSpec
from stepscope_contract.wire import HookRequest
from stepscope_hook._options import CAPTURE_OPTIONS, dump_only, read_options, step_timeout

pytestmark = pytest.mark.unit
FIELDS = {info.alias or name: info for name, info in HookRequest.model_fields.items()}
assert set(CaptureSpec.model_fields) <= set(HookRequest.model_fields)


def _bound(name: str, kind: type) -> int | None:
    for item in FIELDS[name].metadata:
        if isinstance(item, kind):
            value: Any = getattr(item, "ge", None) if kind is annotated_types.Ge else getattr(item, "le", None)
            return int(value)
    return None


@pytest.mark.parametrize("name", sorted(CAPTURE_OPTIONS))
def test_the_hooks_copy_matches_the_contract(name: str) -> None:
    default, low, high = CAPTURE_OPTIONS[name]
    assert name in FIELDS, f"{name} is not a capture option of the contract"
    expected = FIELDS[name].get_default(call_default_factory=True)
    assert default == (list(expected) if isinstance(expected, list) else expected)
    assert (low, high) == (_bound(name, annotated_types.Ge), _bound(name, annotated_types.Le))


def test_every_option_the_hook_acts_on_is_in_its_copy() -> None:
    acted_on = {"steps", "skipSteps", "activities", "recordShapes", "withStack", "profileMemory", "stepTimeoutSeconds",
                "dumpOnly", "pythonSampling"}  # fmt: skip
    assert set(CAPTURE_OPTIONS) == acted_on


def test_a_request_the_sidecar_writes_reads_back_the_same() -> None:
    request = HookRequest.model_validate({"captureId": "c", "steps": 3, "requestedAt": 1.0, "withStack": True})
    options = read_options(request.wire())
    assert options["steps"] == 3 and options["withStack"] is True
    assert options["skipSteps"] == request.skip_steps and options["stepTimeoutSeconds"] == request.step_timeout_seconds


def test_defaults_fill_what_a_hand_written_request_leaves_out() -> None:
    assert read_options({"captureId": "c"}) == {name: default for name, (default, _, _) in CAPTURE_OPTIONS.items()}


@pytest.mark.parametrize(
    ("field", "value"),
    [("steps", 0), ("steps", 1001), ("steps", "3"), ("steps", True), ("skipSteps", -1), ("steps", 2.5),
     ("activities", "cpu"), ("recordShapes", "yes"), ("stepTimeoutSeconds", 0), ("dumpOnly", "yes")],
)  # fmt: skip
def test_out_of_bounds_or_mistyped_options_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        read_options({field: value})


def test_the_watchdogs_timeout_never_raises() -> None:
    assert step_timeout({"stepTimeoutSeconds": 7}) == 7.0
    assert step_timeout({"stepTimeoutSeconds": "soon"}) == 120.0


def test_only_a_true_dump_only_asks_for_a_dump() -> None:
    """A dump request profiles nothing; a dumpOnly that is not true/false stays a capture request that read_options
    refuses (so a typo never starts profiling nor a dump)."""
    request = HookRequest.model_validate({"captureId": "c", "requestedAt": 1.0, "dumpOnly": True})
    assert dump_only(request.wire()) and read_options(request.wire())["dumpOnly"] is True
    assert not dump_only({"captureId": "c"}) and not dump_only({"dumpOnly": "yes"}) and not dump_only({"dumpOnly": 1})
