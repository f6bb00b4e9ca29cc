"""file:// storage: keys are absolute paths. Writes go to a temporary name, are synced, then renamed, so a reader
never sees half a file; deletion removes links and never follows them."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from stepscope_contract.storage import StorageLocation
from stepscope_storage.checksums import sha256_file
from stepscope_storage.store import ChecksumMismatch, StorageError, Stored, TooLargeError, TransferCounts


def _replace_synced(tmp: Path, target: Path) -> None:
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, target)


def _files_below(folder: Path, prefix: str = "") -> list[str]:
    """The files below `folder` (symbolic links to files too), each as `prefix` + its path from `folder`; folders that
    are symbolic links are not entered (as Path.rglob). Each directory entry says what it is: no file is stat-ed but
    links."""
    found: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        try:
            if entry.is_dir() and not entry.is_symlink():
                found += _files_below(Path(entry.path), f"{prefix}{entry.name}/")
            elif entry.is_file():
                found.append(prefix + entry.name)
        except OSError:
            continue
    return found


class LocalStore:
    def __init__(self) -> None:
        self._counts = TransferCounts()

    @property
    def counts(self) -> TransferCounts:
        return TransferCounts(self._counts.calls, self._counts.attempts)

    def list_keys(self, location: StorageLocation) -> list[str]:
        root = Path(location.prefix)
        if root.is_file():
            return [str(root)]
        if not root.is_dir():
            raise StorageError(f"{root} is not a folder or a file")
        base = "" if str(root) == "." else str(root).rstrip("/") + "/"  # str(root / name) for each name below
        return sorted(_files_below(root, base))

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        try:
            path = Path(key)
            if most is None:
                return path.read_bytes()
            size = path.stat().st_size
            if size > most and not truncate:
                raise TooLargeError(key, size)
            limit = most if truncate else most + 1  # one byte more: a file that grew since its size was read
            with path.open("rb") as fh:
                data = fh.read(min(size + 1, limit))  # a buffer of the file's size, not of the limit
                if len(data) > size:  # it grew: read on up to the limit
                    data += fh.read(limit - len(data))
            if len(data) > most:
                raise TooLargeError(key, len(data))
            return data
        except OSError as exc:
            raise StorageError(f"cannot read {key}: {exc.strerror or exc}") from exc

    def exists(self, key: str) -> bool:
        return Path(key).is_file()

    def write(self, key: str, data: bytes, content_type: str) -> str:
        path = Path(key)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            _replace_synced(tmp, path)
        except OSError as exc:
            raise StorageError(f"cannot write {key}: {exc.strerror or exc}") from exc
        return self.uri(key)

    def _copy(self, source: Path, target: Path) -> Stored:
        tmp = target.with_name(f".{target.name}.part")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, tmp)
            _replace_synced(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise StorageError(f"cannot copy {source} to {target}: {exc.strerror or exc}") from exc
        return Stored(self.uri(str(target)), target.stat().st_size, sha256_file(target))

    def put_file(self, local: Path, key: str, content_type: str, *, deadline: float | None = None) -> Stored:
        self._counts.calls += 1
        self._counts.attempts += 1
        expected = sha256_file(local)
        stored = self._copy(local, Path(key))
        if stored.sha256 != expected:
            raise ChecksumMismatch(f"{key}: stored SHA-256 {stored.sha256} differs from {expected}")
        return stored

    def get_file(self, key: str, local: Path) -> Stored:
        stored = self._copy(Path(key), local)
        return Stored(self.uri(key), stored.size, stored.sha256)

    def uri(self, key: str) -> str:
        return f"file://{key}"

    def delete(self, key: str) -> bool:
        path = Path(key)
        if path.is_symlink() or not path.is_file():
            return False
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot delete {key}: {exc.strerror or exc}") from exc
        return True

    def delete_prefix(self, location: StorageLocation) -> int:
        """Remove the folder `location` and everything in it (symbolic links are removed, never followed)."""
        root = Path(location.prefix)
        if root.is_symlink() or not root.is_dir():
            return 0
        count = 0
        for folder, dirs, files in os.walk(root, topdown=False, followlinks=False):
            for name in files + [d for d in dirs if (Path(folder) / d).is_symlink()]:
                (Path(folder) / name).unlink()
                count += 1
            for name in dirs:
                path = Path(folder) / name
                if not path.is_symlink():
                    path.rmdir()
        root.rmdir()
        return count
