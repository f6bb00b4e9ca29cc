"""file:// storage (LocalStore) alone: its keys are the files below the folder as Path.rglob finds them (hidden ones,
symbolic links to files; linked folders not entered), and a bounded read of a file that grew since its size was read
takes what the bound allows: the whole file within it, the error beyond it, the first bytes when truncating."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stepscope_contract.storage import Scheme, StorageLocation
from stepscope_storage import TooLargeError
from stepscope_storage.local import LocalStore


def test_keys_are_the_files_rglob_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a" / ".hidden").mkdir(parents=True)
    (tmp_path / "a" / ".hidden" / "x.json").write_text("{}")
    (tmp_path / "f").write_text("1")
    os.symlink(tmp_path / "f", tmp_path / "to-file")
    os.symlink(tmp_path / "a", tmp_path / "to-folder")
    os.symlink(tmp_path / "missing", tmp_path / "broken")
    monkeypatch.chdir(tmp_path)
    for root in (str(tmp_path), f"{tmp_path}/", ".", "a", "./a/"):
        expected = sorted(str(p) for p in Path(root).rglob("*") if p.is_file())
        assert LocalStore().list_keys(StorageLocation(Scheme.FILE, "", root)) == expected, root
    assert LocalStore().list_keys(StorageLocation(Scheme.FILE, "", str(tmp_path))) == [
        f"{tmp_path}/a/.hidden/x.json", f"{tmp_path}/f", f"{tmp_path}/to-file"]  # fmt: skip


def test_a_file_that_grew_since_its_size_was_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = tmp_path / "grown.bin"
    key.write_bytes(b"x" * 100)
    stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda self, **kw: os.stat_result((*stat(self)[:6], 10, *stat(self)[7:])))
    assert Path(key).stat().st_size == 10  # as it was when its size was read
    store = LocalStore()
    assert store.read(str(key), most=100) == b"x" * 100
    with pytest.raises(TooLargeError):
        store.read(str(key), most=50)
    assert store.read(str(key), most=50, truncate=True) == b"x" * 50
