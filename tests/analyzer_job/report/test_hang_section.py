"""The report's hang section, rendered from real 4-rank gloo hangs: one line that groups the ranks, the wavefront as
a small table, the mismatch, the culprit's stack first and whole (no scroll box), stepscope's own thread left out."""

from __future__ import annotations

import re
import sys
from html import unescape
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flight_recorder"))
from fr_dumps import session_folder, site

from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import flight_recorder_dumps, reduce_outcomes
from stepscope_analyzer.report import html_bytes

pytestmark = pytest.mark.unit


def hang_section(fault: str, tmp_path: Path) -> tuple[str, str]:
    folder = session_folder(fault, tmp_path / fault)
    store = LocalStore()
    layout = discover(store, location_of(str(folder)))
    report = reduce_outcomes(
        summarize_all(store, layout), include_missing=True, flight_recorder=flight_recorder_dumps(store, layout)
    )
    page = html_bytes(report).decode()
    section = page[page.index('<h2 id="hangs">') : page.index('<h2 id="ranks">')]
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", section)))
    return section, text


def test_a_stuck_rank_culprit_first_others_grouped_wavefront_table(tmp_path: Path) -> None:
    section, text = hang_section("stuck", tmp_path)
    culprit = "rank 2: stuck at train_faults.py:29 in stuck_in_data_loader"
    waiting = f"ranks 0, 1, 3: in all_reduce from {site('backward')}"
    assert f"{culprit} — {waiting}" in text  # the one-line summary
    assert "Wavefront · default_pg, seq" in text and f"all_reduce [289], issued at {site('backward')}" in text
    assert re.search(r"2 behind all_reduce \[4\] seq \d+ \(completed\)", text)
    assert re.search(r"0, 1, 3 waiting all_reduce \[289\] seq \d+ \(not completed\)", text)
    # stacks: the culprit's group first, each group once, whole, no scroll box, without the hook's own thread
    headings = re.findall(r"<h3>(.*?)</h3>", unescape(section))
    assert headings[1:] == [f"{culprit} — the culprit", waiting], headings
    assert section.count('<pre class="stack">') == 2
    assert "stepscope-watchdog" not in section and "_watch_once" not in section
    assert "the stacks of rank 0, the same on every rank of the group" in text


def test_a_desync_shows_the_mismatch(tmp_path: Path) -> None:
    section, text = hang_section("collective", tmp_path)
    assert "Mismatch: rank 2 called broadcast [1024] where ranks 0, 1, 3 called all_reduce [4], seq" in text
    headings = re.findall(r"<h3>(.*?)</h3>", unescape(section))
    assert headings[1:] == [
        f"rank 2: in broadcast from {site('collective')} — the culprit",
        f"ranks 0, 1, 3: in all_reduce from {site('metrics')}",
    ], headings


def test_stacks_are_never_in_a_scroll_box() -> None:
    css = Path(__file__).resolve().parents[3] / "analyzer_job/stepscope_analyzer/report/templates/_style.css.j2"
    assert "pre.stack { max-height: none; }" in css.read_text()
