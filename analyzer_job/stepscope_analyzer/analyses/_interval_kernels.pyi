from typing_extensions import Buffer

def search_right(values: Buffer, keys: Buffer, out: Buffer, /) -> None:
    """out[i] = the number of values <= keys[i] (values sorted; float64, float64, int64 buffers), as
    numpy.searchsorted(values, keys, side="right")."""

def coverage_before(starts: Buffer, ends: Buffer, cum: Buffer, x: Buffer, out: Buffer, /) -> None:
    """out[i] = the length of the disjoint sorted [starts, ends) pieces in (-inf, x[i]] (cum[j]: the lengths before
    piece j; float64 buffers), as intervals.coverage_before computes it with numpy."""

def pieces(
    a_starts: Buffer,
    a_ends: Buffer,
    b_starts: Buffer,
    b_ends: Buffer,
    keep_in_b: bool,
    out_starts: Buffer,
    out_ends: Buffer,
    /,
) -> int:
    """The pieces of A in B (keep_in_b) or outside it, touching ones joined, for disjoint sorted sets (float64
    buffers; room for len(a) + len(b) + 1 pieces); their count, or -1 at a NaN."""

def first_level(
    points: Buffer, delta: Buffer, at: Buffer, levels: int, out_starts: Buffer, out_ends: Buffer, out_levels: Buffer, /
) -> int:
    """The runs of time each level owns first (the first level with an interval open there), in time order, from
    the intervals' boundaries in time order (float64 points; int64 delta +1/-1 and level); their count, or -1 (a NaN,
    a level out of range) for numpy to decide."""

def name_times(
    s: Buffer,
    e: Buffer,
    first: Buffer,
    cover_starts: Buffer,
    cover_ends: Buffer,
    cover_cum: Buffer,
    total: Buffer,
    merged: Buffer,
    covered: Buffer,
    /,
) -> None:
    """Per name of rows sorted by (name, start), the names starting at `first` (int64): the summed durations, the
    union of its intervals and the part of it the cover pieces cover (float64 buffers, one output per name)."""

def coarsen_pass(
    starts: Buffer,
    ends: Buffer,
    kinds: Buffer,
    least: float,
    out_starts: Buffer,
    out_ends: Buffer,
    out_kinds: Buffer,
    /,
) -> int:
    """One pass of step_spans._pass over a step's stretches in time order (float64 starts and ends, int64 kinds):
    each shorter than `least` to its longer neighbour, neighbours of one phase joined; the count kept, written to the
    outputs (as long as the inputs at least)."""

def children(
    starts: Buffer, ends: Buffer, sorted_ends: Buffer, depth_last: Buffer, covered: Buffer, own: Buffer, /
) -> None:
    """own[i] less what event i's direct children cover, for finite events sorted by start (longer first), as
    self_times._children computes it with numpy (float64 buffers; depth_last int64 and covered: scratch; all as
    long)."""
