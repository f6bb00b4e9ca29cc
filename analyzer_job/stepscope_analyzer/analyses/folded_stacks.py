"""A rank's sampled Python stacks (python_stacks.folded, stepscope_contract.python_stacks) read within the
contract's caps: at most MAX_STACKS stacks, MAX_FRAMES + 1 frames each, MAX_FRAME_CHARS characters a frame; lines
beyond them or not in the format are skipped and counted. Each stack's samples become milliseconds per recorded step
(the window over the samples taken, per step), so ranks sampled at different real rates compare. Pure."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from stepscope_contract.python_stacks import HEADER_PREFIX, MAX_FILE_BYTES, MAX_FRAME_CHARS, MAX_FRAMES, MAX_STACKS

_LINE = re.compile(r"(.+) ([0-9]{1,9})")
_FRAME = re.compile(r"(.*) \((.*):([0-9]{1,9})\)")


class FoldedStacksError(ValueError):
    """A file that is no folded stacks file of the hook's."""


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int

    @property
    def text(self) -> str:
        return f"{self.function} ({self.file}:{self.line})"

    @property
    def where(self) -> tuple[str, str]:
        """The function as a place: its name and file, any line."""
        return self.function, self.file


def parse_frame(text: str) -> Frame:
    found = _FRAME.fullmatch(text)
    if found is None:
        return Frame(text, "", 0)
    return Frame(found.group(1), found.group(2), int(found.group(3)))


@dataclass
class FoldedStacks:
    hz: int
    ticks: int
    window_ms: float
    steps: int
    stacks: list[tuple[tuple[str, ...], int]] = field(default_factory=list)
    skipped: int = 0

    @property
    def ms_per_sample_step(self) -> float:
        """What one sample weighs, in ms per recorded step."""
        if self.ticks <= 0 or self.steps <= 0:
            return 0.0
        return self.window_ms / self.ticks / self.steps

    def per_step(self) -> dict[tuple[str, ...], float]:
        """Every stack's samples as ms per step."""
        weight = self.ms_per_sample_step
        out: dict[tuple[str, ...], float] = {}
        for frames, n in self.stacks:
            out[frames] = out.get(frames, 0.0) + n * weight
        return out


def _number(header: dict[str, object], name: str) -> float:
    value = header.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value > 1e12:
        raise FoldedStacksError(f"header field {name} is not a finite number: {value!r}")
    return float(value)


def read_folded(data: bytes) -> FoldedStacks:
    """The stacks of one file (at most MAX_FILE_BYTES of it are read); FoldedStacksError when its header is not
    the hook's."""
    text = data[:MAX_FILE_BYTES].decode("utf-8", "replace")
    lines = text.split("\n")
    if not lines[0].startswith(HEADER_PREFIX):
        raise FoldedStacksError("no stepscope-python-stacks header")
    try:
        header = json.loads(lines[0][len(HEADER_PREFIX) :])
    except ValueError as exc:
        raise FoldedStacksError(f"the header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FoldedStacksError("the header is not a JSON object")
    out = FoldedStacks(hz=int(_number(header, "hz")), ticks=int(_number(header, "ticks")),
                       window_ms=_number(header, "windowMs"), steps=int(_number(header, "steps")))  # fmt: skip
    for line in lines[1:]:
        if not line:
            continue
        found = _LINE.fullmatch(line)
        frames = tuple(found.group(1).split(";")) if found else ()
        if not found or len(out.stacks) >= MAX_STACKS or len(frames) > MAX_FRAMES + 1:
            out.skipped += 1
            continue
        out.stacks.append((tuple(f[: MAX_FRAME_CHARS + 20] for f in frames), int(found.group(2))))
    return out
