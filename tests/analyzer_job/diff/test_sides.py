"""A side of a diff from what `stepscope analyze` takes or from an existing report: a report.json, a folder or a
session folder whose traces are gone but whose report is there, a folder of traces; anything else is a SideError
that says what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_analyzer.diff import SideError, load_side
from stepscope_analyzer.diff import sides as sides_module
from stepscope_analyzer.report import model_json_bytes

pytestmark = pytest.mark.integration


@pytest.fixture
def traces(tmp_path: Path, gloo_traces: list[bytes]) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    for r, data in enumerate(gloo_traces):
        (folder / f"rank{r}.pt.trace.json.gz").write_bytes(data)
    return folder


def test_a_folder_of_traces_is_analysed(traces: Path) -> None:
    seen: list[str] = []
    report = load_side(str(traces), progress=seen.append)
    assert [r.rank for r in report.ranks] == [0, 1]
    assert all(r.steps.count > 0 and r.top_functions for r in report.ranks)
    assert any("folder of traces" in line for line in seen)
    one = load_side(f"file://{traces}/rank1.pt.trace.json.gz")
    assert [r.rank for r in one.ranks] == [1]


def test_a_report_json_is_read_as_is(tmp_path: Path, traces: Path) -> None:
    report = load_side(str(traces))
    path = tmp_path / "main-report.json"
    path.write_bytes(model_json_bytes(report))
    assert load_side(str(path)) == report


@pytest.mark.parametrize("where", ["report.json", "report/report.json"])
def test_a_folder_without_traces_uses_its_report(tmp_path: Path, traces: Path, where: str) -> None:
    report = load_side(str(traces))
    folder = tmp_path / "session-abc12345"
    (folder / where).parent.mkdir(parents=True, exist_ok=True)
    (folder / where).write_bytes(model_json_bytes(report))
    assert load_side(str(folder)) == report


def test_unusable_sources_say_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SideError, match=r"no traces and no report\.json in file://"):
        load_side(str(empty))
    with pytest.raises(SideError, match="is not a folder or a file"):
        load_side(str(tmp_path / "absent"))
    with pytest.raises(SideError, match="scheme 'ftp' is not supported"):
        load_side("ftp://host/x")
    bad = tmp_path / "report.json"
    bad.write_text('{"ranks": "nope"}')
    with pytest.raises(SideError, match=r"is not a stepscope report\.json"):
        load_side(str(bad))
    monkeypatch.setattr(sides_module, "MAX_REPORT_BYTES", 10)
    with pytest.raises(SideError, match="more than a report may be"):
        load_side(str(bad))
