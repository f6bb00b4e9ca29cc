"""The demo's reports (fixtures/demo_sessions: compute, host, hang, desync) in headless Chromium: the verdict and
what to look at next as a person reads them, the timeline and memory drawn for the sessions that ran, each hung
rank's stacks and Flight Recorder dump linked to files that exist, and no section without content."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from stepscope_analyzer.ranks.storage_io import location_of
from stepscope_analyzer.report import html_bytes, with_trace_links

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browser_probe import ensure_chromium, probe
from test_demo_sessions import SESSIONS, analyse

from stepscope_testing.local_analysis import analyse_folder

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

LEADS = {
    "compute": "Rank 2 runs ",
    "host": "Rank 2 spends ",
    "hang": "Read rank 2's stacks below",
    "desync": "Rank 2 took a code path the other ranks did not",
}


@pytest.fixture(scope="module")
def chromium() -> str:
    path, why = ensure_chromium()
    if path is None:
        pytest.skip(why)
    return path


def _seen(mode: str, tmp_path: Path, chromium: str) -> dict[str, Any]:
    """report.html written where the session's report goes (report/ beside traces/), read back in Chromium."""
    session = tmp_path / mode
    (session / "report").mkdir(parents=True)
    shutil.copytree(SESSIONS / mode / "traces", session / "traces")
    report = with_trace_links(analyse_folder(session), location_of(str(session / "report")))
    page = session / "report" / "report.html"
    page.write_bytes(html_bytes(report))
    return probe(chromium, page)


@pytest.mark.parametrize("mode", ["compute", "host", "hang", "desync"])
def test_the_demo_report_reads_true_in_a_browser(mode: str, tmp_path: Path, chromium: str) -> None:
    seen = _seen(mode, tmp_path, chromium)
    report = analyse(mode)
    assert seen["verdictVisible"] and seen["verdict"] == report.diagnosis.verdict
    text = seen["text"]
    assert LEADS[mode] in text and "Top bottleneck across ranks: gloo:all_reduce" not in text
    empty = [s["title"] for s in seen["sections"] if not s["visible"] or s["contentHeight"] < 10]
    assert not empty, empty
    ids = {s["id"] for s in seen["sections"]}
    if mode in ("compute", "host"):
        assert "timeline" in ids and seen["timelineRects"] >= 4 * 2
        labels = seen["timelineLabels"]
        assert {"rank 0", "rank 1", "rank 2", "rank 3", "collectives end"} <= set(labels)
        assert any(t.startswith("gloo:all_reduce") for t in labels)
        assert any(t.startswith("extra_compute" if mode == "compute" else "data loading") for t in labels)
        assert "in collectives / step" in text
        assert "memory" in ids and seen["memoryMarks"] >= 4  # the demo's session records memory: a line per rank
    else:
        assert ids.isdisjoint({"breakdown", "phases", "timeline", "bottlenecks", "communication", "errors"})
        assert "rank 2 holds the job up; ranks 0, 1, 3 wait for it" in text
        hrefs = sorted(a["href"] for a in seen["artifacts"])
        files = ("flight_recorder.json.gz", "stacks.txt")
        assert hrefs == sorted(f"../traces/rank{r}/{f}" for r in range(4) for f in files)
        assert all(a["visible"] and a["exists"] for a in seen["artifacts"]), seen["artifacts"]
    assert seen["requested"] == [] and seen["scripts"] == 0
