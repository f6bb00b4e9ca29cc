from typing_extensions import Buffer

def search_right(values: Buffer, keys: Buffer, out: Buffer, /) -> None:
    """out[i] = the number of values <= keys[i] (values sorted; float64, float64, int64 buffers), as
    numpy.searchsorted(values, keys, side="right")."""
