"""Where two parses of one trace differ: the columns, tables and maps a TraceColumns holds (for the tests that hold
the parser's paths to the same result)."""

from __future__ import annotations

import numpy as np

from stepscope_analyzer.parse import TraceColumns

ARRAYS = ("name_id", "cat_id", "ts", "dur", "pid", "tid", "stream", "correlation", "external_id")


def differences(a: TraceColumns, b: TraceColumns) -> list[str]:
    """The fields of `a` and `b` that differ (arrays: dtype and values); empty when they are the same."""
    out = [f for f in ("names", "cats", "rounded_ns", "collective_args", "thread_names", "labels")
           if getattr(a, f) != getattr(b, f)]  # fmt: skip
    for f in ARRAYS:
        x, y = getattr(a, f), getattr(b, f)
        if x.dtype != y.dtype or not np.array_equal(x, y):
            out.append(f)
    return out
