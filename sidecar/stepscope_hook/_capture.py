"""One torch.profiler recording of exactly N steps, with ProfilerStep#i markers and rank metadata."""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Dict, List, Optional

from ._schedstat import METADATA_KEY, StepCpu


class CaptureError(Exception):
    """A capture request this process cannot honour; the capture fails, training goes on."""


def resolve_activities(names: List[str], cuda_available: bool) -> List[Any]:
    """Map request activity names to torch.profiler activities; CUDA is dropped when there is no GPU."""
    import torch.profiler as tp

    out = []
    for name in names:
        key = str(name).lower()
        if key == "cpu":
            out.append(tp.ProfilerActivity.CPU)
        elif key == "cuda":
            if cuda_available:
                out.append(tp.ProfilerActivity.CUDA)
        else:
            raise CaptureError("unknown profiler activity %r (expected 'cpu' or 'cuda')" % (name,))
    if not out:
        raise CaptureError("no usable profiler activity in %r on this host" % (names,))
    return out


class ProfilerRun:
    """Wraps torch.profiler.profile without a schedule; the hook marks steps itself so that the
    trace holds exactly `steps` ProfilerStep#i spans, each from one step boundary to the next."""

    def __init__(self, options: Dict[str, Any], metadata: Dict[str, Any]) -> None:
        """`options`: the request's capture options as _options.read_options returns them."""
        import torch
        import torch.profiler as tp

        self.cuda = bool(torch.cuda.is_available())
        activities = resolve_activities(list(options["activities"]), self.cuda)
        self.device = "cuda" if any(a == tp.ProfilerActivity.CUDA for a in activities) else "cpu"
        self._prof = tp.profile(
            activities=activities,
            record_shapes=bool(options["recordShapes"]),
            with_stack=bool(options["withStack"]),
            profile_memory=bool(options["profileMemory"]),
        )
        self._metadata = metadata
        self._marker: Optional[Any] = None
        self.step_index = 0
        self.started = False
        self._cpu = StepCpu()

    def start(self) -> None:
        import torch.distributed as dist

        self._prof.start()
        self.started = True
        self._prof.add_metadata_json("stepscope", json.dumps(self._metadata))
        if not (dist.is_available() and dist.is_initialized()):
            info = {
                "backend": "none",
                "rank": self._metadata.get("rank", 0),
                "world_size": self._metadata.get("worldSize", 1),
            }
            self._prof.add_metadata_json("distributedInfo", json.dumps(info))
        self._open_marker()

    def _open_marker(self) -> None:
        import torch.autograd.profiler as ap

        marker: Any = ap.record_function("ProfilerStep#%d" % self.step_index)
        marker.__enter__()
        self._marker = marker
        self._cpu.opened()

    def _close_marker(self) -> None:
        if self._marker is not None:
            marker, self._marker = self._marker, None
            self._cpu.closed(self.step_index)
            marker.__exit__(None, None, None)

    def next_step(self) -> None:
        """At a step boundary inside the window: close this step's span, open the next."""
        self._close_marker()
        self.step_index += 1
        self._open_marker()

    def finish(self, trace_path: str) -> None:
        """Close the last span, stop the profiler and write the gzipped Chrome trace."""
        self._close_marker()
        self._cpu.close()
        if self._cpu.steps:
            with contextlib.suppress(Exception):  # the measure is an aid: a profiler that refuses it loses nothing
                self._prof.add_metadata_json(METADATA_KEY, json.dumps(self._cpu.metadata()))
        self._prof.stop()
        self.started = False
        os.makedirs(os.path.dirname(trace_path), exist_ok=True)
        tmp = trace_path[: -len(".json.gz")] + ".tmp.json.gz"
        self._prof.export_chrome_trace(tmp)
        os.replace(tmp, trace_path)

    def discard(self) -> None:
        """Stop without writing anything (abort, hang, error); never raises."""
        with contextlib.suppress(Exception):
            self._close_marker()
        self._cpu.close()
        if self.started:
            self.started = False
            with contextlib.suppress(Exception):
                self._prof.stop()
