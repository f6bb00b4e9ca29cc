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
# all are freed, in MiB; "worker": the same in a rank worker forked from a process that fixed its threshold, then
# in that process.
LEFT_BEHIND = """
    import os, sys
    from stepscope_analyzer.workers import heap, rank_pool
    def rss():
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    def left_behind():
        first = b"\x01" * (8 << 20)
        del first
        before = rss()
        blocks, pins = [], []
        for _ in range(16):
            blocks.append(b"\x01" * (2 << 20))
            pins.append(b"\x02" * 100_000)
        del blocks
        return (rss() - before) >> 20
    if __name__ == "__main__":
        if sys.argv[1] != "moving":
            assert heap.return_large_frees()
        if sys.argv[1] == "worker":
            with rank_pool._executor(1) as pool:
                print(pool.submit(left_behind).result(), end=" ")
        print(left_behind())
"""


def _left_behind(mode: str) -> list[int]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LEFT_BEHIND), mode], capture_output=True, text=True, check=True
    )
    return [int(n) for n in proc.stdout.split()]


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_freed_blocks_of_a_few_mib_leave_the_heap_once_the_threshold_is_fixed() -> None:
    assert _left_behind("moving")[0] >= 24  # 16 blocks of 2 MiB stay resident behind the pins
    assert _left_behind("fixed")[0] <= 4


def test_elsewhere_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope_analyzer.workers import heap

    monkeypatch.setattr(heap.sys, "platform", "darwin")
    assert heap.return_large_frees() is False


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_a_worker_keeps_its_freed_blocks_for_its_next_ones_whatever_its_caller_set() -> None:
    """A worker allocates and frees blocks of a few MiB all along: it keeps them in its heap (its thresholds are its
    own, heap.for_worker), while the process it was forked from gives them back."""
    in_worker, in_caller = _left_behind("worker")
    assert in_worker >= 24
    assert in_caller <= 4
