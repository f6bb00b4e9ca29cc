"""report.json written rank by rank is the same bytes as the Report serialised whole: for a recorded job, for a
report without ranks, and for one the fast path cannot write (a lone surrogate in a name: the whole report's slower
path, its names made '?'); stored through a file into a store."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from stepscope_analyzer import limits
from stepscope_analyzer.commands.report_file import save_report_json, store_report_json, write_report_json
from stepscope_analyzer.limits import LimitExceededError
from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_analyzer.report import model_json_bytes
from stepscope_contract.report import Bottleneck, Diagnosis, RankReport, Report

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def job_report() -> Report:
    folder = FIXTURES / "gpu_jobs" / sorted(p.name for p in (FIXTURES / "gpu_jobs").iterdir() if p.is_dir())[0]
    store = LocalStore()
    layout = discover(store, location_of(str(folder)))
    return reduce_outcomes(summarize_all(store, layout, workers=1), include_missing=layout.session)


def _written(report: Report) -> bytes:
    out = io.BytesIO()
    write_report_json(report, out)
    return out.getvalue()


def test_a_recorded_jobs_report_is_the_same_bytes(job_report: Report) -> None:
    assert len(job_report.ranks) >= 2
    assert _written(job_report) == model_json_bytes(job_report)


def test_a_report_without_ranks_or_with_one(job_report: Report) -> None:
    for ranks in ([], job_report.ranks[:1]):
        report = job_report.model_copy(update={"ranks": ranks})
        assert _written(report) == model_json_bytes(report)


def test_a_name_the_fast_path_cannot_write_goes_the_slow_way() -> None:
    bad = RankReport(rank=1, top_functions=[Bottleneck(name="x\udcff", category="cpu_op")])
    report = Report(generated_at="2026-01-01T00:00:00Z", diagnosis=Diagnosis(verdict="v"),
                    ranks=[RankReport(rank=0), bad])  # fmt: skip
    out = io.BytesIO(b"head")
    out.seek(4)
    write_report_json(report, out)
    assert out.getvalue() == b"head" + model_json_bytes(report)
    assert b'"x?"' in out.getvalue()


def test_stored_and_saved(job_report: Report, tmp_path: Path) -> None:
    key = str(tmp_path / "session" / "report" / "report.json")
    uri = store_report_json(job_report, LocalStore(), key)
    assert uri == f"file://{key}"
    assert Path(key).read_bytes() == model_json_bytes(job_report)
    save_report_json(job_report, tmp_path / "r.json")
    assert (tmp_path / "r.json").read_bytes() == model_json_bytes(job_report)


def test_a_layout_it_does_not_know_writes_the_report_whole(job_report: Report, monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope_analyzer.commands import report_file

    monkeypatch.setattr(report_file, "_RANKS", b'\n  "ranks": []')  # as if the serialiser indented otherwise
    assert _written(job_report) == model_json_bytes(job_report)


def test_report_json_is_never_written_beyond_its_limit(job_report: Report) -> None:
    """The analyzer pod's scratch space holds report.json on its way to storage: the writer stops at its limit."""
    size = len(_written(job_report))
    out = io.BytesIO()
    with limits.override(max_report_json_bytes=size - 1), pytest.raises(LimitExceededError, match="max_report_json"):
        write_report_json(job_report, out)
    with limits.override(max_report_json_bytes=size):
        assert _written(job_report) == model_json_bytes(job_report)
