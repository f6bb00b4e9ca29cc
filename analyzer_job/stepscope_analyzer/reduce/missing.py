"""Ranks a world size announces but storage does not hold, as ranges: O(ranks present), never O(world size). Pure.

A manifest or trace may claim any world size up to `max_world_size`; the report lists the first
`max_listed_missing_ranks` missing ranks one by one and all of them as a rank set ("4-1023,2000"), so report.json stays
small whatever the claim.
"""

from __future__ import annotations

from collections.abc import Iterable


def missing_ranges(present: Iterable[int], world_size: int) -> list[tuple[int, int]]:
    """Inclusive (low, high) ranges of 0..world_size-1 not in `present`."""
    ranges: list[tuple[int, int]] = []
    nxt = 0
    for rank in sorted({r for r in present if 0 <= r < world_size}):
        if rank > nxt:
            ranges.append((nxt, rank - 1))
        nxt = rank + 1
    if nxt < world_size:
        ranges.append((nxt, world_size - 1))
    return ranges


def count(ranges: list[tuple[int, int]]) -> int:
    return sum(high - low + 1 for low, high in ranges)


def first(ranges: list[tuple[int, int]], most: int) -> list[int]:
    """The first `most` ranks of the ranges."""
    out: list[int] = []
    for low, high in ranges:
        out.extend(range(low, min(high, low + most - len(out) - 1) + 1))
        if len(out) >= most:
            break
    return out


def rank_set_text(ranges: list[tuple[int, int]]) -> str:
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)
