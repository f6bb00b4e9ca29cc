"""Wire documents without NaN or Infinity. Pure.

JSON has no NaN or Infinity: an API server refuses a status patch that carries one (the status then freezes), and a
store that keeps one serves invalid JSON to every reader of the namespace. Every status write goes through
`finite_wire`: a non-finite number in an object becomes null (in a merge patch: the field is unknown, so removed)
and one in a list is left out. Inputs that feed a status (step telemetry, GPU metrics) refuse non-finite numbers in
their models (`allow_inf_nan=False`), so this is the last guard, not the first.
"""

from __future__ import annotations

import math
from typing import Any


def finite_wire(doc: Any) -> Any:
    """`doc` (a JSON-shaped value: dicts, lists, str, int, float, bool, None) with every non-finite float removed."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {key: finite_wire(value) for key, value in doc.items()}
    if isinstance(doc, list | tuple):
        return [finite_wire(v) for v in doc if not (isinstance(v, float) and not math.isfinite(v))]
    return doc


def non_finite_paths(doc: Any, path: str = "") -> list[str]:
    """Where `doc` holds NaN or Infinity (JSON-pointer-like paths); empty when it holds none."""
    if isinstance(doc, float):
        return [] if math.isfinite(doc) else [path or "/"]
    if isinstance(doc, dict):
        return [p for key, value in doc.items() for p in non_finite_paths(value, f"{path}/{key}")]
    if isinstance(doc, list | tuple):
        return [p for i, value in enumerate(doc) for p in non_finite_paths(value, f"{path}/{i}")]
    return []
