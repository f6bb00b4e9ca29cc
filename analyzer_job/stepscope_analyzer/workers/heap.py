"""The heap of the process that hands ranks to the workers (rank_pool.compute_all: `stepscope analyze`, each
analyzer Job shard): a large block it frees goes back to the system at once.

glibc's malloc serves an allocation of at least its mmap threshold from a mapping of its own, unmapped when freed,
but each such free raises the threshold to the freed size (up to 32 MiB on 64-bit), so that later allocations of
that size come from the heap instead, where a free block is returned only when it is at the heap's top. That
process reads each stored trace in one piece (a few MiB), hands it to a worker and lets it go: with
the threshold raised, those reads and their pickled copies stay in its heap beside the objects that outlive them,
and its resident memory grows with every rank up to the report. Fixing the threshold keeps them in mappings of
their own. Only that process does this: a worker allocates and frees its inflated blocks all along, and
a fresh mapping for each costs page faults (bench/ranks_vs_hta.py prints the largest process and the time).
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
LARGE_BYTES = 256 << 10
"""allocations of at least this size get a mapping of their own (glibc's default threshold before it moves: 128 KiB)"""


def return_large_frees(threshold: int = LARGE_BYTES) -> bool:
    """Fix this process's mmap threshold at `threshold` bytes (glibc on Linux); whether the C library took it.
    Elsewhere (another OS, another C library without mallopt) nothing changes."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))


__all__ = ["LARGE_BYTES", "M_MMAP_THRESHOLD", "return_large_frees"]
