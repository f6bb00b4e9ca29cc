"""The folded Python stacks a rank's hook writes beside its trace (storage.PYTHON_STACKS_FILE): format and caps.

While the steps are recorded, the hook samples the training thread's Python stack `capture.pythonSampling` times a
second (sys._current_frames, no ptrace) and writes one line per distinct stack, root frame first, in the folded
format flamegraph.pl and speedscope read:

    # stepscope-python-stacks {"hz": 100, "ticks": 512, "windowMs": 5120.4, "steps": 5, "dropped": 0, "samples": 470}
    main (demo/train_ddp.py:124);load_batch (demo/train_ddp.py:56) 301

A stack's count is the sampling periods (1/hz seconds) its samples stand for: each sample counts the periods that
elapsed since the previous one, so a stack the sampler reached late (a CPU-bound Python loop holds the GIL the
sampler needs; a starved process runs it late) weighs the time it held, not the number of samples taken in it.
The header is a comment line (it ends in "}", so folded readers skip it); `ticks` is the periods counted (the sum of
the counts and `dropped`), `windowMs` the time they cover, `dropped` the periods of stacks beyond the MAX_STACKS most
sampled ones, `samples` how many samples were taken (at most `ticks`). A frame is
`function (path:line)`; ';' and line breaks never appear in a frame. The hook keeps a stdlib copy of these caps
(stepscope_hook._sampler), which a test holds against this module; readers read the file within MAX_FILE_BYTES.
"""

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

from stepscope_contract.empty import new_list

HEADER_PREFIX: Final = "# stepscope-python-stacks "
MAX_STACKS: Final = 400
"""distinct stacks a file holds (the most sampled ones)"""
MAX_FRAMES: Final = 48
"""frames of one stack (the innermost ones; the root side is cut and marked ROOT_CUT)"""
MAX_FRAME_CHARS: Final = 160
"""characters of one frame's text"""
MAX_FILE_BYTES: Final = MAX_STACKS * (MAX_FRAMES * (MAX_FRAME_CHARS + 1) + 24) + 1024
"""what a reader reads at most (a file within the caps above always fits)"""
MAX_HZ: Final = 1000
ROOT_CUT: Final = "[deeper frames cut]"

MAX_LINES: Final = 8
"""Python lines a host finding lists"""
MAX_FLAME_STACKS: Final = 100
"""stacks of each flame graph report.json carries (the heaviest)"""
MAX_PEERS: Final = 8
"""peers whose stacks a named rank is compared with"""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class PythonLine(_Model):
    """A Python frame that accounts for part of a rank's excess: what it runs there and its peers do not."""

    function: Annotated[str, Field(max_length=MAX_FRAME_CHARS)]
    file: Annotated[str, Field(max_length=MAX_FRAME_CHARS)]
    line: int = Field(description="the line in `file` with the most of the excess")
    ms_per_step: float = Field(description="this rank's samples in the frame (and below it), in ms per step")
    peers_ms_per_step: float = Field(description="the median of its peers' samples there, in ms per step")
    excess_ms_per_step: float = Field(description="what the rank spends there beyond its peers, ms per step")
    callers: Annotated[list[Annotated[str, Field(max_length=MAX_FRAME_CHARS)]], Field(max_length=3)] = Field(
        default_factory=new_list, description="the frames above it, the nearest first ('function (path:line)')"
    )


class FlameStack(_Model):
    frames: Annotated[list[Annotated[str, Field(max_length=MAX_FRAME_CHARS + 20)]], Field(max_length=MAX_FRAMES + 1)]
    ms_per_step: float


class PythonProfile(_Model):
    """The named rank's sampled Python stacks and the differential against its peers (flame graphs' data)."""

    rank: Annotated[int, Field(ge=0)]
    hz: int
    samples: int
    peers: str = Field(default="", description="the ranks compared with, as a rank set")
    stacks: Annotated[list[FlameStack], Field(max_length=MAX_FLAME_STACKS)] = Field(default_factory=new_list)
    differential: Annotated[list[FlameStack], Field(max_length=MAX_FLAME_STACKS)] = Field(
        default_factory=new_list, description="per stack, what the rank spends beyond its peers' median (positive only)"
    )
