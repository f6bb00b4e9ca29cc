"""Reads the hooks' step telemetry (ring files in `<hook dir>/telemetry/`, layout in stepscope_contract.step_telemetry):
the series the operator's triggers pull with `GET /v1/steps`, and the figures of the sidecar's step metrics.

The files are written by the training processes while they are read: a file is read in one go, and only the slots
whose step number is the expected one are kept. Anything that is not a well-formed ring of the known version is
skipped (a reader never trusts sizes it did not check).
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stepscope_contract.step_telemetry import (
    BUCKET,
    BUCKETS_OFFSET,
    CLOSED,
    CLOSED_OFFSET,
    COUNTERS,
    COUNTERS_OFFSET,
    FLAG_PROFILED,
    HEADER_FIXED,
    HEADER_SIZE,
    HISTOGRAM_BOUNDS,
    MAGIC,
    MAX_CAPACITY,
    MAX_RANKS_PER_POD,
    SLOT,
    SLOT_SIZE,
    TELEMETRY_DIR,
    VERSION,
    RankSteps,
)

RING_NAME = re.compile(r"^rank-([0-9]{1,7})\.steps$")


@dataclass(frozen=True)
class Step:
    seq: int
    ended: float  # unix time
    duration: float  # seconds
    backward: float
    data_wait: float
    profiled: bool

    @property
    def own(self) -> float:
        return max(self.duration - self.backward, 0.0)


@dataclass(frozen=True)
class Ring:
    """One training process's ring file as read."""

    rank: int
    world_size: int
    pid: int
    started: float
    count: int  # steps recorded since the process began
    last_step: float  # unix time of the last step boundary (0: none yet)
    duration_sum: float
    closed: bool
    buckets: tuple[int, ...]  # per bucket (not cumulative), +Inf last
    steps: tuple[Step, ...]  # the last ones asked for, oldest first

    def normal_steps(self) -> list[Step]:
        """The steps that ran without a capture in hand."""
        return [s for s in self.steps if not s.profiled]


MAX_SECONDS = 1e12  # beyond any wall time or duration: what lies past it is garbage (and x1000 must stay finite)


def _finite(value: float) -> bool:
    return math.isfinite(value) and 0.0 <= value <= MAX_SECONDS


def parse_ring(data: bytes, last: int) -> Ring | None:
    """The ring in `data` with its last `last` steps; None when it is not a ring of this version."""
    if len(data) < HEADER_SIZE:
        return None
    magic, version, header_size, capacity, slot_size, rank, world, pid, started = HEADER_FIXED.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION or header_size != HEADER_SIZE or slot_size != SLOT_SIZE:
        return None
    if not 1 <= capacity <= MAX_CAPACITY or len(data) < HEADER_SIZE + capacity * SLOT_SIZE or rank < 0:
        return None
    count, last_step, duration_sum = COUNTERS.unpack_from(data, COUNTERS_OFFSET)
    (closed,) = CLOSED.unpack_from(data, CLOSED_OFFSET)
    buckets = tuple(
        BUCKET.unpack_from(data, BUCKETS_OFFSET + BUCKET.size * i)[0] for i in range(len(HISTOGRAM_BOUNDS) + 1)
    )
    steps: list[Step] = []
    for seq in range(max(0, count - max(0, min(last, capacity - 1))), count):
        got, ended, duration, backward, data_wait, flags = SLOT.unpack_from(
            data, HEADER_SIZE + (seq % capacity) * SLOT_SIZE
        )
        if got != seq or not all(_finite(v) for v in (ended, duration, backward, data_wait)):
            continue  # being rewritten, or garbage
        steps.append(Step(seq, ended, duration, backward, data_wait, bool(flags & FLAG_PROFILED)))
    return Ring(
        rank=rank,
        world_size=max(world, 1),
        pid=pid,
        started=started,
        count=count,
        last_step=last_step if _finite(last_step) else 0.0,
        duration_sum=duration_sum if _finite(duration_sum) else 0.0,
        closed=bool(closed),
        buckets=buckets,
        steps=tuple(steps),
    )


def read_rings(hook_dir: Path, last: int) -> list[Ring]:
    """Every rank's ring in the hook dir (at most MAX_RANKS_PER_POD), by rank; unreadable ones are skipped."""
    folder = hook_dir / TELEMETRY_DIR
    try:
        names = sorted(p for p in folder.iterdir() if RING_NAME.match(p.name))
    except OSError:
        return []
    rings: dict[int, Ring] = {}
    for path in names[:MAX_RANKS_PER_POD]:
        try:
            with path.open("rb") as fh:
                data = fh.read(HEADER_SIZE + MAX_CAPACITY * SLOT_SIZE)
        except OSError:
            continue
        ring = parse_ring(data, last)
        if ring is not None and ring.rank == int(RING_NAME.match(path.name).group(1)):  # type: ignore[union-attr]
            rings[ring.rank] = ring
    return [rings[r] for r in sorted(rings)]


def seconds_since_last_step(ring: Ring, now: float | None = None) -> float | None:
    """On this host's clock (the hook's); None before the first step or once the series is closed."""
    if ring.closed or ring.count == 0 or ring.last_step <= 0:
        return None
    return max((time.time() if now is None else now) - ring.last_step, 0.0)


def _ms(value: float) -> float:
    return round(value * 1000.0, 3)


def rank_steps(ring: Ring, now: float | None = None) -> RankSteps:
    """A ring as the wire's RankSteps."""
    return RankSteps(
        rank=ring.rank,
        world_size=ring.world_size,
        pid=ring.pid,
        steps_total=ring.count,
        seconds_since_last_step=seconds_since_last_step(ring, now),
        closed=ring.closed,
        ended_at=[round(s.ended, 3) for s in ring.steps],
        duration_ms=[_ms(s.duration) for s in ring.steps],
        backward_ms=[_ms(s.backward) for s in ring.steps],
        data_wait_ms=[_ms(s.data_wait) for s in ring.steps],
        profiled=[s.profiled for s in ring.steps],
    )


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def steps_per_second(steps: Sequence[Step]) -> float | None:
    """Steps over the time they took, from the first one's start to the last one's end."""
    if len(steps) < 2:
        return None
    span = steps[-1].ended - (steps[0].ended - steps[0].duration)
    return len(steps) / span if span > 0 else None
