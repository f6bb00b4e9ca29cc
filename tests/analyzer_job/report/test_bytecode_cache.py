"""The report templates' compiled code is kept between runs, and a cache that cannot be used never fails a report."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from stepscope_analyzer.report.bytecode_cache import CACHE_DIR_ENV, bytecode_cache

pytestmark = pytest.mark.unit

SOURCE = "{% for n in names %}<li>{{ n }}</li>{% endfor %}"


def _render(cache: jinja2.BytecodeCache | None, source: str = SOURCE) -> str:
    env = jinja2.Environment(loader=jinja2.DictLoader({"t.j2": source}), autoescape=True, bytecode_cache=cache)
    return env.get_template("t.j2").render(names=["<b>", "x"])


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".cache")


def test_compiled_code_is_stored_and_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "c"))
    first = _render(bytecode_cache())
    entries = _entries(tmp_path / "c")
    assert len(entries) == 1
    assert first == "<li>&lt;b&gt;</li><li>x</li>"

    loaded: list[bool] = []

    class Watching(type(bytecode_cache())):  # type: ignore[misc]
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            super().load_bytecode(bucket)
            loaded.append(bucket.code is not None)

    assert _render(Watching(str(tmp_path / "c"))) == first
    assert loaded == [True]
    # an edited template compiles afresh (its source checksum no longer matches) and renders the new source
    assert _render(Watching(str(tmp_path / "c")), SOURCE + "!") == first + "!"
    assert loaded == [True, False]


def test_damaged_entry_is_compiled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    expected = _render(bytecode_cache())
    for entry in _entries(tmp_path):
        entry.write_bytes(entry.read_bytes()[:40] + b"\x00garbage")
    assert _render(bytecode_cache()) == expected


def test_vanished_directory_never_fails_a_render(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "c"
    monkeypatch.setenv(CACHE_DIR_ENV, str(folder))
    cache = bytecode_cache()
    os.rmdir(folder)  # the cache cannot write its entry now
    assert _render(cache) == "<li>&lt;b&gt;</li><li>x</li>"
    assert not folder.exists()


def test_unusable_or_disabled_directory_means_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(a_file / "below"))
    assert bytecode_cache() is None
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    assert bytecode_cache() is None
