"""A fresh clone tests on its own: nothing under tests/ or testing/ (fixtures included, gzip-compressed ones opened)
reads a folder beside the checkout or names a machine's own layout (checkouts, home folders, temporary job folders;
in recorded fixtures also virtualenvs, site-packages and any absolute source path of a stack frame). Test code may
still build absolute paths as inputs: the analyzer reads stacks that older hooks and faulthandler write."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
# each rule: a literal that bytes.find scans for quickly, then a pattern that must match where it was found
BESIDE = [(b"../shared", rb"\.\./shared"), (b"/shared/data/", rb"/shared/data/"),
          (b"shared", rb"shared[\"'] */ *[\"']data[\"']")]  # fmt: skip
MACHINE = [(b"/" + d + b"/", rb"/" + d + rb"/[\w.+-]+") for d in (b"work", b"workspace", b"home", b"Users", b"root")]
MACHINE += [(b"/tmp/", rb"/tmp/[\w.+-]+/[\w.+-]+/")]  # a folder below /tmp (torch's temporary trace file is fine)
RECORDED = [(b'File "/', rb'File "/[^"\n]{0,300}"'), (b'"filename":"/', rb'"filename":"/[^"\n]{0,300}"'),
            (b'"filename": "/', rb'"filename": "/[^"\n]{0,300}"')]  # fmt: skip
INSTALLED = (b"/site-packages/", b"/dist-packages/", b"/.venv/")
BEFORE = re.compile(rb"[\w.:/-]")
TOKEN = re.compile(rb"[^\s\"'(=,]*$")


def _hits(data: bytes, rules: list[tuple[bytes, bytes]], anchored: bool = True) -> list[bytes]:
    out = []
    for needle, pattern in rules:
        rx = re.compile(pattern)
        at = data.find(needle)
        while at >= 0 and len(out) < 3:
            m = rx.match(data, at)
            # a path that begins here: not the tail of a longer name or of a relative path
            if m and not (anchored and needle.startswith(b"/") and at and BEFORE.match(data, at - 1)):
                out.append(m.group(0))
            at = data.find(needle, at + 1)
    return out


def _absolute_installed(data: bytes) -> list[bytes]:
    """Absolute paths into a virtualenv or site-packages (`/x/.venv/lib/...`; `site-packages/torch/...` is fine)."""
    out = []
    for needle in INSTALLED:
        at = data.find(needle)
        while at >= 0 and len(out) < 3:
            head = TOKEN.search(data, max(0, at - 300), at)
            if head and data[head.start() : head.start() + 1] == b"/":
                out.append(data[head.start() : at + len(needle)])
            at = data.find(needle, at + 1)
    return out


def _files() -> list[Path]:
    out = []
    for root in (REPO / "tests", REPO / "testing"):
        out += [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return out


def _content(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError):
            return data
    return data


def test_the_patterns_find_what_they_look_for() -> None:
    assert _hits(b'ROOT.parent / "shared" / "data" / "traces"', BESIDE) and _hits(b"see ../shared/data", BESIDE)
    assert _hits(b" /work/wt-x/testing/a.py", MACHINE) and _hits(b'"/tmp/i35/hang/cluster/pods/p"', MACHINE)
    assert not _hits(b'"traceName": "/tmp/tmpu3g3sevh.json"', MACHINE)  # torch's temporary file: no layout
    assert not _hits(b"gs://bucket/work/x", MACHINE)
    assert _hits(b'File "/usr/lib/python3.12/threading.py", line 1', RECORDED, anchored=False)
    assert _absolute_installed(b'"name": "/opt/x/.venv/lib/python3.11/site-packages/torch/nn/module.py(12): f"')
    assert not _absolute_installed(b'"name": "site-packages/torch/nn/module.py(12): f"')
    assert not _hits(b'File "site-packages/torch/_tensor.py", line 1', RECORDED, anchored=False)


def test_no_test_data_reads_beside_the_checkout_or_names_a_machine() -> None:
    found = []
    for path in _files():
        if path == Path(__file__).resolve():
            continue
        data = _content(path)
        hits = _hits(data, BESIDE, anchored=False) + _hits(data, MACHINE)
        if "fixtures" in path.relative_to(REPO).parts and path.suffix not in (".py", ".md"):  # recorded data
            hits += _hits(data, RECORDED, anchored=False) + _absolute_installed(data)
        found += [f"{path.relative_to(REPO)}: {h.decode(errors='replace')}" for h in hits[:3]]
    assert not found, "\n".join(found)
