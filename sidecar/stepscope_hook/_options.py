"""The capture options the hook reads from request.json: names, defaults and bounds (stdlib only, Python 3.9+).

A copy, because the hook runs inside users' training processes without pydantic or stepscope_contract. The
declaration is stepscope_contract.session.CaptureSpec (the spec, the wire request and request.json all use it);
tests/sidecar/hook/test_options.py holds this table against it, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

# name in request.json -> (default, lowest, highest); bounds only for numbers
CAPTURE_OPTIONS: Dict[str, Tuple[Any, Optional[int], Optional[int]]] = {
    "steps": (5, 1, 1000),
    "skipSteps": (1, 0, 100000),
    "activities": (["cpu", "cuda"], None, None),
    "recordShapes": (False, None, None),
    "withStack": (False, None, None),
    "profileMemory": (False, None, None),
    "pythonSampling": (100, 0, 1000),
    "stepTimeoutSeconds": (120, 1, 3600),
    "dumpOnly": (False, None, None),
}


def _number(name: str, value: Any, low: Optional[int], high: Optional[int]) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError("%s must be a whole number, not %r" % (name, value))
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise ValueError("%s must be within %s..%s, not %d" % (name, low, high, number))
    return number


def _names(name: str, value: Any) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("%s must be a list of names, not %r" % (name, value))
    return list(value)


def read_options(request: Dict[str, Any]) -> Dict[str, Any]:
    """The request's options with the defaults filled in; ValueError names the first one that is wrong."""
    options: Dict[str, Any] = {}
    for name, (default, low, high) in CAPTURE_OPTIONS.items():
        value = request.get(name, default)
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError("%s must be true or false, not %r" % (name, value))
            options[name] = value
        elif isinstance(default, list):
            options[name] = _names(name, value)
        else:
            options[name] = _number(name, value, low, high)
    return options


def dump_only(request: Dict[str, Any]) -> bool:
    """Whether a request asks only for stacks and the Flight Recorder dump. Only a JSON `true` does: any other value
    leaves it a capture request, which read_options then refuses naming dumpOnly (nothing is profiled by mistake)."""
    return request.get("dumpOnly") is True


def step_timeout(request: Dict[str, Any]) -> float:
    """stepTimeoutSeconds of a request, the default when it is unusable (the watchdog never raises)."""
    try:
        return float(read_options(request)["stepTimeoutSeconds"])
    except ValueError:
        return float(CAPTURE_OPTIONS["stepTimeoutSeconds"][0])
