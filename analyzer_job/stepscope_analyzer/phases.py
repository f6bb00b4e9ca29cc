"""When each phase of `stepscope analyze` ended, on the system's monotonic clock (time.perf_counter, the same in
every process of the machine): bench/ranks_vs_hta.py splits the command's time with them (imports, pool start, rank
work, diagnosis, report). Written to stderr as one line when STEPSCOPE_PHASES is set; recording costs nothing else."""

from __future__ import annotations

import json
import os
import sys
import time

ENV = "STEPSCOPE_PHASES"
_STAMPS: dict[str, float] = {}


def mark(name: str, at: float | None = None) -> None:
    """The first time `name` happened (later marks of the same name are ignored)."""
    _STAMPS.setdefault(name, time.perf_counter() if at is None else at)


def report() -> None:
    if os.environ.get(ENV):
        print(f"phases: {json.dumps(_STAMPS)}", file=sys.stderr, flush=True)


__all__ = ["ENV", "mark", "report"]
