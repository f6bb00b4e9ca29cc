"""Semantic checks of one rank's events before any analysis: times a real trace cannot hold. Pure.

The parser already refuses what is not a number; here the numbers must also make sense together. An event whose
end (`ts + dur`) lies beyond 2**53 µs cannot be placed exactly on a float timeline, and an event that lasts far
longer than the trace's own window (the span of its events' starts) would dominate every figure of the rank: one
`dur` of 1e300 must not make a healthy rank "slow by ~993%". Such a rank is rejected with a message naming the
event, and the other ranks are analysed as usual.
"""

from __future__ import annotations

import numpy as np

from stepscope_analyzer.parse import TraceColumns, TraceError

MAX_END_US = 2.0**53
MIN_SLACK_US = 1_000_000.0
"""an event may end this long after the last event starts, even in a tiny trace"""


def check_event_times(ev: TraceColumns) -> None:
    """Raise TraceError when an event ends beyond 2**53 µs or lasts longer than the trace's own window."""
    if len(ev) == 0:
        return
    end = ev.ts + ev.dur
    beyond = np.flatnonzero(~np.isfinite(end) | (end > MAX_END_US))
    if beyond.size:
        i = int(beyond[0])
        raise TraceError(
            f"event {_name(ev, i)!r} (#{i}) ends beyond 2**53 µs (ts {ev.ts[i]:.6g} + dur {ev.dur[i]:.6g}): "
            "not a time a trace can hold"
        )
    first, last = float(ev.ts.min()), float(ev.ts.max())
    span = last - first
    limit = last + max(span, MIN_SLACK_US)
    outside = np.flatnonzero(end > limit)
    if outside.size:
        i = int(outside[np.argmax(ev.dur[outside])])
        raise TraceError(
            f"event {_name(ev, i)!r} (#{i}) lasts {ev.dur[i]:.6g} µs, far beyond the trace's own window "
            f"({span / 1e6:.3g} s of events): not a real duration"
        )


def _name(ev: TraceColumns, row: int) -> str:
    name = ev.names[int(ev.name_id[row])]
    return name if len(name) <= 80 else name[:79] + "…"
