"""glibc's malloc thresholds of the analyzer's processes: the process that hands ranks to the workers
(rank_pool.compute_all: `stepscope analyze`, each analyzer Job shard) returns a large block it frees to the system
at once; a worker keeps its freed blocks in its heap for its next ones.

glibc's malloc serves an allocation of at least its mmap threshold from a mapping of its own, unmapped when freed,
but each such free raises the threshold to the freed size (up to 32 MiB on 64-bit), so that later allocations of
that size come from the heap instead, where a free block is returned only when it is at the heap's top. That
process reads each stored trace in one piece (a few MiB), hands it to a worker and lets it go: with
the threshold raised, those reads and their pickled copies stay in its heap beside the objects that outlive them,
and its resident memory grows with every rank up to the report. Fixing the threshold keeps them in mappings of
their own. Only that process does this: a worker allocates and frees its inflated blocks all along, and
a fresh mapping for each costs page faults (bench/ranks_vs_hta.py prints the largest process and the time). The
workers are forked from that process, so each sets its thresholds where the moving ones end (for_worker).
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
LARGE_BYTES = 256 << 10
"""allocations of at least this size get a mapping of their own (glibc's default threshold before it moves: 128 KiB)"""
WORKER_BYTES = 32 << 20
"""a worker's mmap threshold: the most glibc's moving threshold reaches on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX); its
trim threshold is twice that, as the moving one sets it"""


def _mallopt(settings: dict[int, int]) -> bool:
    """glibc's mallopt for each (parameter, value); whether the C library took them all. Elsewhere (another OS,
    another C library without mallopt) nothing changes."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return all([bool(mallopt(param, value)) for param, value in settings.items()])


def return_large_frees(threshold: int = LARGE_BYTES) -> bool:
    """Fix this process's mmap threshold at `threshold` bytes (glibc on Linux); whether the C library took it."""
    return _mallopt({M_MMAP_THRESHOLD: threshold})


def for_worker() -> None:
    """A rank worker's thresholds, set as it starts (rank_pool's initializer): blocks under WORKER_BYTES come from
    its heap and stay there for its next ones, whatever the process it was forked from had set."""
    _mallopt({M_MMAP_THRESHOLD: WORKER_BYTES, M_TRIM_THRESHOLD: 2 * WORKER_BYTES})


__all__ = ["LARGE_BYTES", "M_MMAP_THRESHOLD", "M_TRIM_THRESHOLD", "WORKER_BYTES", "for_worker", "return_large_frees"]
