"""The coordinating process returns a large block it frees to the system at once (workers.heap), where glibc's
moving mmap threshold would otherwise keep such blocks in the heap below objects that outlive them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit

GLIBC = sys.platform.startswith("linux") and "glibc" in " ".join(__import__("platform").libc_ver())

# One large block freed (which moves glibc's threshold past the blocks that follow), then blocks of a few MiB, each
# followed by a smaller object that stays (above it in the heap): the resident memory the blocks leave behind once
# all are freed, in MiB.
LEFT_BEHIND = """
    import os, sys
    from stepscope_analyzer.workers import heap
    if sys.argv[1] == "fixed":
        assert heap.return_large_frees()
    def rss():
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    first = b"\x01" * (8 << 20)
    del first
    before = rss()
    blocks, pins = [], []
    for _ in range(16):
        blocks.append(b"\x01" * (2 << 20))
        pins.append(b"\x02" * 100_000)
    del blocks
    print((rss() - before) >> 20)
"""


def _left_behind(mode: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LEFT_BEHIND), mode], capture_output=True, text=True, check=True
    )
    return int(proc.stdout)


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_freed_blocks_of_a_few_mib_leave_the_heap_once_the_threshold_is_fixed() -> None:
    assert _left_behind("moving") >= 24  # 16 blocks of 2 MiB stay resident behind the pins
    assert _left_behind("fixed") <= 4


def test_elsewhere_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope_analyzer.workers import heap

    monkeypatch.setattr(heap.sys, "platform", "darwin")
    assert heap.return_large_frees() is False


# The same measure in a rank worker forked from a process that fixed its threshold: the worker sets its own.
IN_A_WORKER = """
    import os
    from stepscope_analyzer.workers import heap, rank_pool
    def rss():
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    def left_behind():
        before = rss()
        blocks, pins = [], []
        for _ in range(16):
            blocks.append(b"\\x01" * (2 << 20))
            pins.append(b"\\x02" * 100_000)
        del blocks
        return (rss() - before) >> 20
    if __name__ == "__main__":
        assert heap.return_large_frees()
        with rank_pool._executor(1) as pool:
            print(pool.submit(left_behind).result(), left_behind())
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_a_worker_keeps_its_freed_blocks_for_its_next_ones_whatever_its_caller_set() -> None:
    """A worker allocates and frees blocks of a few MiB all along: it keeps them in its heap (its thresholds are its
    own, heap.for_worker), while the process it was forked from gives them back."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(IN_A_WORKER)], capture_output=True, text=True, check=True, timeout=60
    )
    in_worker, in_caller = map(int, proc.stdout.split())
    assert in_worker >= 24
    assert in_caller <= 4
