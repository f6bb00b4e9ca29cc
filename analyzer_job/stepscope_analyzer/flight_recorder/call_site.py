"""The Python line that issued a collective: the innermost frame of the training code in a recorded stack. Pure;
frames are anything with a filename, a line and a function name (the dump's frames)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Protocol, TypeVar

# Frames of these packages are the machinery between the training code and the collective, not the call site
# (matched against "/" + the path: the hook writes paths relative to site-packages, the stdlib or the job's folders).
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "/torch/", "/stepscope_hook/", "/lib/python3")


class FrameLike(Protocol):
    @property
    def filename(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def name(self) -> str: ...


F = TypeVar("F", bound=FrameLike)


def is_library(filename: str) -> bool:
    path = "/" + filename.replace("\\", "/")
    return any(marker in path for marker in _LIBRARY_MARKERS) or filename.startswith("<")


def format_frame(frame: FrameLike) -> str:
    return f"{PurePosixPath(frame.filename.replace(chr(92), '/')).name}:{frame.line} in {frame.name}"


def call_site_frame(frames: list[F]) -> F | None:
    """The innermost frame of the training code (frames run innermost first); for code installed as a package,
    the innermost frame outside torch; else the innermost frame."""
    for frame in frames:
        if frame.filename and not is_library(frame.filename):
            return frame
    for frame in frames:
        path = "/" + frame.filename.replace("\\", "/")
        if frame.filename and "/torch/" not in path and "/stepscope_hook/" not in path:
            return frame
    return frames[0] if frames else None


def call_site(frames: list[F]) -> str | None:
    """'file.py:line in function' of `call_site_frame`."""
    frame = call_site_frame(frames)
    return format_frame(frame) if frame is not None else None
