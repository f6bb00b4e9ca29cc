"""The demo's training as a real 3-rank gloo job with the stepscope hook loaded as pods load it (a capture request
waiting, capture.pythonSampling at its default), recorded once and analysed as `stepscope analyze` does. Rank 2
runs the host+python variant: it sleeps in load_batch (the host demo's planted work, inside record_function) and
runs plain Python before it (parse_records, no record_function):
- the finding names load_batch's planted line in train_ddp.py, and no line that every rank runs;
- it names parse_records, which no record_function marks;
- the merged trace: what Perfetto's JSON rules ask, HTA loads it, and every rank's collectives end together within
  the skew the alignment reports.
"""

from __future__ import annotations

import ast
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from stepscope_analyzer.evidence.merged_trace import anchors
from stepscope_contract.python_stacks import PythonLine
from stepscope_contract.report import Cause, Report
from stepscope_contract.session import CaptureSpec
from stepscope_contract.storage import MERGED_TRACE_DIR, MERGED_TRACE_FILE, REPORT_HTML, REPORT_JSON, SPEEDSCOPE_FILE
from stepscope_testing.hooked_demo import DEMO, record_demo

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _demo_function(name: str) -> tuple[int, int]:
    """First and last line of a function of the demo's script."""
    tree = ast.parse(DEMO.read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert fn.end_lineno is not None
    return fn.lineno, fn.end_lineno


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    """The session recorded, then `stepscope analyze SESSION -o OUT` as a user runs it: (OUT, its report)."""
    root = tmp_path_factory.mktemp("hooked-demo")
    session = record_demo(root, mode="host+python", slow_ms=30.0, hz=CaptureSpec().python_sampling)
    out = root / "report"
    subprocess.run([sys.executable, "-m", "stepscope_cli.main", "analyze", str(session), "-o", str(out)], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    return out, Report.model_validate_json((out / REPORT_JSON).read_bytes())


def _slow_lines(report: Report) -> list[PythonLine]:
    (slow,) = report.diagnosis.slow_ranks
    assert (slow.rank, slow.cause) == (2, Cause.HOST)
    return slow.python_lines


def test_the_host_demo_names_the_planted_line_and_no_line_every_rank_runs(recorded: tuple[Path, Report]) -> None:
    _, report = recorded
    lines = _slow_lines(report)
    first, last = _demo_function("load_batch")
    (top,) = [x for x in lines if x.function == "load_batch"]
    assert (top.function, top.file) == ("load_batch", "demo/train_ddp.py") and first <= top.line <= last
    assert "time.sleep(slow_ms" in DEMO.read_text().splitlines()[top.line - 1]  # the planted line itself
    assert top.excess_ms_per_step > 0.25 * report.diagnosis.slow_ranks[0].excess_us / 1000
    for line in lines:  # what the others run as much: never named (main, forward, backward, the optimizer)
        assert line.peers_ms_per_step * 2 <= line.ms_per_step and line.function not in ("main", "<module>")
    profile = report.python_profile
    assert profile is not None and profile.rank == 2 and profile.peers == "0-1"
    assert any(s.frames[-1].startswith("load_batch (demo/train_ddp.py:") for s in profile.differential[:3])


def test_plain_python_on_the_slow_rank_is_named_by_its_function(recorded: tuple[Path, Report]) -> None:
    _, report = recorded
    (line,) = [x for x in _slow_lines(report) if x.function == "parse_records"]
    first, last = _demo_function("parse_records")
    assert line.file == "demo/train_ddp.py" and first <= line.line <= last
    assert line.callers[0].startswith("main (demo/train_ddp.py:") and line.peers_ms_per_step == 0


def test_the_page_shows_the_lines_and_both_flame_graphs_and_speedscope_opens_the_stacks(
    recorded: tuple[Path, Report],
) -> None:
    out, _ = recorded
    page = (out / REPORT_HTML).read_text()
    assert 'id="python-2"' in page and "parse_records" in page and "demo/train_ddp.py:" in page
    flame = page[page.index('id="flame-graph"') :].split("</svg>")[0]
    diff = page[page.index('id="flame-differential"') :].split("</svg>")[0]
    assert "&lt;module&gt; (demo/train_ddp.py:" in flame and "<module>" not in flame  # names escaped
    assert "load_batch (demo/train_ddp.py:" in diff and "parse_records (demo/train_ddp.py:" in diff
    document = json.loads((out / SPEEDSCOPE_FILE).read_bytes())
    assert document["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = document["shared"]["frames"]
    for profile in document["profiles"]:
        assert profile["type"] == "sampled" and len(profile["samples"]) == len(profile["weights"])
        assert all(0 <= i < len(frames) for sample in profile["samples"] for i in sample)
    assert any(f["name"].startswith("parse_records") and f["file"] == "demo/train_ddp.py" for f in frames)


# Perfetto's JSON trace format (the Trace Event Format as Perfetto's importer reads it): what a file must hold
_NUMBER = {"type": "number"}
METADATA_NAMES = ["process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"]
PERFETTO_JSON = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["ph", "pid", "tid"],
                "properties": {
                    "ph": {"enum": ["X", "B", "E", "i", "I", "C", "M", "s", "t", "f", "b", "e", "n"]},
                    "pid": {"type": "integer"},
                    "tid": {"type": "integer"},
                    "name": {"type": "string"},
                    "ts": _NUMBER,
                    "dur": {"type": "number", "minimum": 0},
                    "args": {"type": "object"},
                },
                "allOf": [
                    {"if": {"properties": {"ph": {"const": "X"}}},
                     "then": {"required": ["name", "ts", "dur"]}},
                    {"if": {"properties": {"ph": {"enum": ["i", "I", "C"]}}}, "then": {"required": ["name", "ts"]}},
                    {"if": {"properties": {"ph": {"const": "M"}}},
                     "then": {"required": ["name", "args"], "properties": {"name": {"enum": METADATA_NAMES}}}},
                ],
            },
        },
    },
}  # fmt: skip


def _merged(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((out / MERGED_TRACE_DIR / MERGED_TRACE_FILE).read_bytes()))
    return data


def test_the_merged_trace_follows_perfettos_json_rules_one_process_per_rank(recorded: tuple[Path, Report]) -> None:
    out, report = recorded
    document = _merged(out)
    jsonschema.validate(document, PERFETTO_JSON)
    events = document["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {0: "rank 0 (demo-0)", 1: "rank 1 (demo-1)", 2: "rank 2 (demo-2)"}
    assert {e["pid"] for e in events} == {0, 1, 2}
    for rank in range(3):  # the ranks' own names, the recorded steps only
        steps = [e["name"] for e in events if e["pid"] == rank and e["name"].startswith("ProfilerStep#")]
        assert len(steps) == 6 and any(e["pid"] == rank and e["name"] == "gloo:all_reduce" for e in events)
    assert any(e["pid"] == 2 and e["name"] == "load_batch" for e in events)
    info = report.merged_trace
    assert info is not None and info.ranks == [0, 1, 2] and info.events == len(events)
    assert (
        info.link == f"{MERGED_TRACE_DIR}/{MERGED_TRACE_FILE}"
        and f'href="{info.link}"' in (out / REPORT_HTML).read_text()
    )


def test_every_ranks_collectives_end_together_within_the_reported_skew(recorded: tuple[Path, Report]) -> None:
    out, report = recorded
    events = _merged(out)["traceEvents"]
    info = report.merged_trace
    assert info is not None
    marks = [anchors([e for e in events if e["pid"] == rank]) for rank in info.ranks]
    assert len({len(m) for m in marks}) == 1 and len(marks[0]) == 6
    spreads = [max(step) - min(step) for step in zip(*marks, strict=True)]
    assert max(spreads) <= info.skew_us + 0.01
    step_us = report.diagnosis.median_step_us
    assert info.skew_us < 0.5 * step_us  # aligned within a fraction of a step, whatever the clocks


def test_hta_opens_the_merged_trace_folder_unchanged(recorded: tuple[Path, Report]) -> None:
    hta = pytest.importorskip("hta.trace_analysis", reason="HTA comes with the bench dependency group")
    out, _ = recorded
    analysis = hta.TraceAnalysis(trace_dir=str(out / MERGED_TRACE_DIR))
    frame = analysis.t.get_trace(0)
    names = analysis.t.symbol_table.get_sym_table()
    assert sorted(int(p) for p in frame["pid"].unique()) == [0, 1, 2]
    assert "gloo:all_reduce" in names and "load_batch" in names
