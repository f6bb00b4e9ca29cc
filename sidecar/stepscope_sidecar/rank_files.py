"""A rank's files in the run folder, opened the way a folder that the training container writes must be read.

The run folder is a volume the training container shares: whatever runs there can plant a symbolic link where a
trace is expected (to `/proc/self/environ`, the sidecar's own environment with its storage keys, or to the token),
or a folder link that leads elsewhere. Every folder from the run folder down to the rank's and every file is opened
with O_NOFOLLOW relative to the folder above it (no path is looked up again afterwards), and a file is kept only when
it is a regular file (fstat). What is kept is read through its open descriptor (`source`: /proc/self/fd/N), so that
a name swapped for a link after the check changes nothing either. Anything refused is named with the reason, for
the rank's manifest and the log.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_DIR_FLAGS = _FLAGS | os.O_DIRECTORY


@dataclass(frozen=True)
class RankFile:
    """A regular file of the rank, held open: `name` in the rank's folder, read through `source`."""

    name: str
    fd: int
    size: int

    @property
    def source(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")


@dataclass
class RankFiles:
    files: list[RankFile] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "<name>: why", for the manifest and the log

    def names(self) -> set[str]:
        return {f.name for f in self.files}

    def get(self, name: str) -> RankFile | None:
        return next((f for f in self.files if f.name == name), None)

    def sources(self) -> dict[str, Path]:
        return {f.name: f.source for f in self.files}


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link, not followed"
    if exc.errno == errno.ENOTDIR:
        return "not a folder (links are not followed)"
    return exc.strerror or type(exc).__name__


def _open_folder(root: Path, below: Sequence[str]) -> int:
    """The folder `root/below...`, each step opened with O_NOFOLLOW relative to the one above; OSError otherwise."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in below:
            if part in ("", ".", "..") or "/" in part:
                raise OSError(errno.EINVAL, f"{part!r} is not a folder name")
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_file(folder: int, name: str) -> tuple[RankFile | None, str | None]:
    """The file `name` of the open folder: a RankFile, (None, None) when it is absent, or why it is refused."""
    try:
        fd = os.open(name, _FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{name}: {_why(exc)}"
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None, f"{name}: not a regular file"
    return RankFile(name, fd, info.st_size), None


@contextlib.contextmanager
def open_rank_files(root: Path, below: Sequence[str], names: Sequence[str]) -> Iterator[RankFiles]:
    """The regular files among `names` in the folder `root/below...`, held open until the block ends; absent ones
    are left out, the others refused with the reason."""
    out = RankFiles()
    try:
        folder = _open_folder(root, below)
    except FileNotFoundError:
        yield out
        return
    except OSError as exc:
        out.refused.append(f"{'/'.join(below)}: {_why(exc)}; none of its files read")
        yield out
        return
    try:
        for name in names:
            found, why = _open_file(folder, name)
            if found is not None:
                out.files.append(found)
            elif why is not None:
                out.refused.append(why)
        yield out
    finally:
        for f in out.files:
            os.close(f.fd)
        os.close(folder)


@contextlib.contextmanager
def held_open(path: Path) -> Iterator[Path]:
    """`path` opened without following a link, as the path of its open descriptor (/proc/self/fd/N) for the block;
    OSError when it is a link or not a regular file."""
    fd = os.open(path, _FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path.name}: not a regular file")
        yield Path(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def regular_file(path: Path | None) -> Path | None:
    """`path` when it is a regular file (not a link to one), else None (logged by the caller's reader)."""
    if path is None:
        return None
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        return path if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)
