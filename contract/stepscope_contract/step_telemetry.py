"""Step telemetry: the ring file the in-process hook writes at every step boundary, and what the sidecar serves.

The hook (stdlib only, `stepscope_hook._telemetry`) keeps a copy of the layout below; a test holds the two together.

Ring file `<hook dir>/telemetry/rank-<rank>.steps`, little-endian, memory-mapped by the hook (MAP_SHARED), read by the
sidecar; it lives in the volume the two share, so it outlives a sidecar restart. One file per training process:

    header (HEADER_SIZE bytes)           magic, version, sizes, rank, world size, pid, start time, then per step:
                                         steps written, wall time of the last step, sum of step durations and a
                                         cumulative histogram of step durations (HISTOGRAM_BOUNDS, +Inf last)
    CAPACITY slots of SLOT_SIZE bytes    the last CAPACITY steps, slot = step number % CAPACITY: step number,
                                         wall time the step ended, its duration, the time spent inside
                                         torch.autograd.backward (where DDP waits for its gradient all-reduce),
                                         the time spent in DataLoader iterators (data wait), flags

A step is the time between two step boundaries (optimizer steps, or explicit `stepscope_hook.step()` calls). The
hook writes a slot first and its step count last; a reader keeps only slots whose step number is the one it
expects, so a slot being rewritten is never mistaken for another step. `closed` is set when the process exits
(or the hook switches itself off): its series then stops for a reason other than a stall.

HTTP (sidecar, bearer token like every route but /healthz): `GET /v1/steps?last=N` -> `PodSteps`, the last N
steps (1..MAX_STEPS_PER_REQUEST) of every rank of the pod.
"""

import struct
from typing import Annotated, Final

from pydantic import ConfigDict, Field

from stepscope_contract.empty import new_list
from stepscope_contract.session import CamelModel

TELEMETRY_DIR: Final = "telemetry"
RING_SUFFIX: Final = ".steps"
MAGIC: Final = b"STEPSCP1"
VERSION: Final = 1
HEADER_SIZE: Final = 512
CAPACITY: Final = 4096
MAX_CAPACITY: Final = 65_536  # what a reader accepts
HISTOGRAM_BOUNDS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    60.0,
    120.0,
)
"""Upper bounds (seconds) of the step-duration histogram's buckets; one more bucket (+Inf) follows."""

# header: magic, version, header size, capacity, slot size, rank, world size, pid, started (unix)
HEADER_FIXED: Final = struct.Struct("<8sIIIIiiqd")
# at COUNTERS_OFFSET, rewritten at every step: steps written, last step (unix), sum of durations (s)
COUNTERS_OFFSET: Final = 48
COUNTERS: Final = struct.Struct("<Qdd")
CLOSED_OFFSET: Final = 72
CLOSED: Final = struct.Struct("<I")
BUCKETS_OFFSET: Final = 80
BUCKET: Final = struct.Struct("<Q")
# slot: step number, ended (unix), duration (s), backward (s), data wait (s), flags
SLOT: Final = struct.Struct("<QdfffI")
SLOT_SIZE: Final = SLOT.size
FLAG_PROFILED: Final = 1
"""The step ran while a capture was requested or running (or exported its trace): not a normal step."""

MAX_STEPS_PER_REQUEST: Final = 2048
MAX_RANKS_PER_POD: Final = 256


def ring_name(rank: int) -> str:
    return f"rank-{rank}{RING_SUFFIX}"


class RankSteps(CamelModel):
    """One training process's recent steps, oldest first (the lists have one entry per step). NaN and Infinity are
    refused: a reply that holds one is not telemetry, and nothing derived from it may reach a status."""

    model_config = ConfigDict(allow_inf_nan=False)

    rank: Annotated[int, Field(ge=0)]
    world_size: Annotated[int, Field(ge=1)] = 1
    pid: int = 0
    steps_total: Annotated[int, Field(ge=0)] = Field(default=0, description="steps recorded since the process began")
    seconds_since_last_step: float | None = Field(
        default=None, description="on the sidecar's clock (the hook's host): no step boundary for this long"
    )
    closed: bool = Field(default=False, description="the process exited or its hook switched off: no stall")
    ended_at: Annotated[list[float], Field(max_length=MAX_STEPS_PER_REQUEST)] = Field(
        default_factory=new_list, description="unix time each step ended"
    )
    duration_ms: Annotated[list[float], Field(max_length=MAX_STEPS_PER_REQUEST)] = Field(default_factory=new_list)
    backward_ms: Annotated[list[float], Field(max_length=MAX_STEPS_PER_REQUEST)] = Field(
        default_factory=new_list, description="time inside torch.autograd.backward (DDP waits there for its all-reduce)"
    )
    data_wait_ms: Annotated[list[float], Field(max_length=MAX_STEPS_PER_REQUEST)] = Field(
        default_factory=new_list, description="time inside DataLoader iterators"
    )
    profiled: Annotated[list[bool], Field(max_length=MAX_STEPS_PER_REQUEST)] = Field(
        default_factory=new_list, description="the step ran during a capture (not a normal step)"
    )

    def own_ms(self) -> list[float]:
        """Each step's own time: its duration outside backward(), where a synchronous job waits for the others."""
        return [max(d - b, 0.0) for d, b in zip(self.duration_ms, self.backward_ms, strict=False)]


class PodSteps(CamelModel):
    """`GET /v1/steps` of one sidecar: every rank of its pod."""

    model_config = ConfigDict(allow_inf_nan=False)

    pod: str | None = None
    ranks: Annotated[list[RankSteps], Field(max_length=MAX_RANKS_PER_POD)] = Field(default_factory=new_list)
