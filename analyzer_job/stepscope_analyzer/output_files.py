"""Writing a command's output files (report, diff) into a local folder."""

from __future__ import annotations

from pathlib import Path


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Create `folder` (and its parents) and write each named file in it (a name may hold a subfolder: 'merged/x');
    OSError when the folder is not writable."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
