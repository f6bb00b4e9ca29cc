"""The folded Python stacks a rank's hook writes beside its trace (storage.PYTHON_STACKS_FILE): format and caps.

While the steps are recorded, the hook samples the training thread's Python stack `capture.pythonSampling` times a
second (sys._current_frames, no ptrace) and writes one line per distinct stack, root frame first, in the folded
format flamegraph.pl and speedscope read:

    # stepscope-python-stacks {"hz": 100, "ticks": 512, "windowMs": 5120.4, "steps": 5, "dropped": 0}
    main (demo/train_ddp.py:124);load_batch (demo/train_ddp.py:56) 301

The header is a comment line (it ends in "}", so folded readers skip it); `ticks` is how many samples were taken,
`windowMs` the time they cover, `dropped` the samples of stacks beyond the MAX_STACKS most sampled ones. A frame is
`function (path:line)`; ';' and line breaks never appear in a frame. The hook keeps a stdlib copy of these caps
(stepscope_hook._sampler), which a test holds against this module; readers read the file within MAX_FILE_BYTES.
"""

from __future__ import annotations

from typing import Final

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
