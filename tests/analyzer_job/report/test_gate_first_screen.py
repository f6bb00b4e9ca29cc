"""The first screen of a regressed session's report in a real browser (headless Chromium, offline, 1280x800): the
gate's red box is what it opens with, above the slow-rank story's box, and no green box comes before it. Checked
twice: in the DOM Chromium laid out (the order of the text a person reads) and in the screenshot's pixels (the box
colours, top to bottom)."""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import pytest

from stepscope_analyzer.report import html_bytes
from stepscope_contract.report import VsBaseline

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "diff"))

from browser_probe import ensure_chromium, probe, screenshot
from report_maker import noisy_job

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ERROR_BOX = (0xFD, 0xEE, 0xEE)  # .verdict.error (report template's style sheet)
OK_BOX = (0xEE, 0xF8, 0xF0)  # .verdict.ok
WIDTH, HEIGHT = 1280, 800


@pytest.fixture(scope="module")
def chromium() -> str:
    path, why = ensure_chromium()
    if path is None:
        pytest.skip(why)
    return path


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        chunk = png[pos + 8 : pos + 8 + length]
        header = chunk if kind == b"IHDR" else header
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and interlace == 0 and color in (2, 6)
    bpp = 4 if color == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r[i] for i in range(len(r)) if i % bpp < 3) for r in rows]


def _box_rows(rows: list[bytes], color: tuple[int, int, int]) -> list[int]:
    """The rows where the box colour fills a stretch of the page's width (the box's background)."""
    run = bytes(color) * 200
    return [y for y, row in enumerate(rows) if run in row]


def _regressed_report() -> bytes:
    report = noisy_job(world=4, n_steps=20, seed=3)
    gate = VsBaseline(
        baseline="s3://stepscope/sessions/default/main-abcd1234/report/report.json",
        baseline_session="main",
        verdict="regressed",
        reason="steps 23.1% slower than the baseline (90% interval +19.0% to +27.4%); added work +28.3% of the rest "
        "of the step on rank 2: added_work: more than the 15% allowed; top change: added_work +28.40 ms/step (added "
        "on rank 2)",
        max_regression_pct=15.0,
        regression_pct=23.1,
        regression_ci_low_pct=19.0,
        regression_ci_high_pct=27.4,
        added_work_pct=28.3,
        decided_by=["steps", "added_work"],
    )
    return html_bytes(report.model_copy(update={"vs_baseline": gate}))


def test_the_regressed_reports_first_screen_is_the_gate(tmp_path: Path, chromium: str) -> None:
    page = tmp_path / "report.html"
    page.write_bytes(_regressed_report())
    seen = probe(chromium, page)
    text: str = seen["text"]
    assert text.index("Vs baseline: regressed") < text.index(seen["verdict"]), text[:600]
    png = tmp_path / "first-screen.png"
    screenshot(chromium, page, png, height=HEIGHT)
    width, height, rows = _pixels(png.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    red, green = _box_rows(rows, ERROR_BOX), _box_rows(rows, OK_BOX)
    assert red, "no red gate box on the first screen"
    assert not green or min(green) > max(red), (min(red), max(red), green[:1])
    assert min(red) < HEIGHT // 2  # it opens the page, not somewhere below the fold
