"""Rank subsets such as "0-7,12": parsing and membership, pure."""

from __future__ import annotations

import re

MAX_RANK = 1_048_575
_PART = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
RANK_SET_PATTERN = r"^\s*\d+\s*(-\s*\d+\s*)?(,\s*\d+\s*(-\s*\d+\s*)?)*$"


class RankSetError(ValueError):
    """A rank subset string that cannot be parsed; the message says which part and why."""


def parse_rank_set(text: str) -> frozenset[int]:
    """Parse "0-7,12" into {0..7, 12}. Ranges are inclusive; overlapping parts are allowed."""
    if not text.strip():
        raise RankSetError("rank subset is empty; use e.g. '0-7,12'")
    ranks: set[int] = set()
    for part in text.split(","):
        match = _PART.match(part)
        if match is None:
            raise RankSetError(f"'{part.strip()}' is not a rank or a range like '0-7'")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise RankSetError(f"range '{part.strip()}' goes backwards ({low} > {high})")
        if high > MAX_RANK:
            raise RankSetError(f"rank {high} exceeds the maximum {MAX_RANK}")
        ranks.update(range(low, high + 1))
    return frozenset(ranks)


def format_rank_set(ranks: frozenset[int] | set[int] | list[int]) -> str:
    """Inverse of parse_rank_set: the shortest "a-b,c" form of a set of ranks."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
