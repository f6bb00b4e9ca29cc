"""The merged trace the analyzer writes beside the report (storage.MERGED_TRACE_FILE): what it holds and its caps.

One Chrome/Perfetto JSON trace (gzip) of the recorded steps of the named ranks and a few peers (every rank of a
small job): each rank is a process (pid = rank, named "rank R (pod)"), its threads and event names as the rank
recorded them, its clock shifted so that the collectives end together (the alignment the report's timeline uses).
"""

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

from stepscope_contract.empty import new_dict

MAX_RANKS: Final = 16
"""ranks in one merged trace"""
WHOLE_JOB_RANKS: Final = 8
"""a job of at most this many ranks is merged whole"""
MAX_EVENTS: Final = 600_000
"""events in one merged trace, shared out between its ranks"""
MAX_SOURCE_BYTES: Final = 48 * 1024 * 1024
"""a rank's trace text (after gzip) that is read whole to merge it; a larger trace is left out, with a note"""


class MergedTrace(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    ranks: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_RANKS)]
    events: int = Field(description="events written")
    events_left_out: int = Field(default=0, description="events beyond the caps, left out (a rank's last ones)")
    skew_us: float = Field(
        description="after the alignment, the largest spread of a collective's end over the ranks, µs"
    )
    offsets_us: dict[str, float] = Field(
        default_factory=new_dict, description="per rank (as text), what was added to its timestamps, µs"
    )
    link: str | None = Field(default=None, description="the file, relative to the report")
    row_ts_us: dict[str, float] = Field(
        default_factory=new_dict,
        description="per rank (as text), where the timeline's step starts in the merged trace, µs from its "
        "first event (as Perfetto's time axis shows it)",
    )
