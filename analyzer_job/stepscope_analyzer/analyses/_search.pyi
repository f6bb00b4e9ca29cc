from typing_extensions import Buffer

def search_right(values: Buffer, keys: Buffer, out: Buffer, /) -> None:
    """out[i] = the number of values <= keys[i] (values sorted; float64, float64, int64 buffers), as
    numpy.searchsorted(values, keys, side="right")."""

def coverage_before(starts: Buffer, ends: Buffer, cum: Buffer, x: Buffer, out: Buffer, /) -> None:
    """out[i] = the length of the disjoint sorted [starts, ends) pieces in (-inf, x[i]] (cum[j]: the lengths before
    piece j; float64 buffers), as intervals.coverage_before computes it with numpy."""
