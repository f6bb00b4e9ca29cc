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
from pathlib import Path

import pytest

from stepscope_contract.python_stacks import PythonLine
from stepscope_contract.report import Cause, Report
from stepscope_contract.session import CaptureSpec
from stepscope_testing.hooked_demo import DEMO, record_demo
from stepscope_testing.local_analysis import analyse_folder

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _demo_function(name: str) -> tuple[int, int]:
    """First and last line of a function of the demo's script."""
    tree = ast.parse(DEMO.read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert fn.end_lineno is not None
    return fn.lineno, fn.end_lineno


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    root = tmp_path_factory.mktemp("hooked-demo")
    session = record_demo(root, mode="host+python", slow_ms=30.0, hz=CaptureSpec().python_sampling)
    return session, analyse_folder(session)


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
