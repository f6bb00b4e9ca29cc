"""`stepscope demo` end to end (needs the operator): the verdict names the planted rank; the session's folder is
kept beside the report, and HTA loads its traces folder as it is; nothing is left running."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        importlib.util.find_spec("stepscope_operator.main") is None, reason="the operator component is not installed"
    ),
]


def test_demo_names_the_planted_slow_rank(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "stepscope"), "demo", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:] + (tmp_path / "operator.log").read_text()[-4000:]
    assert "verdict: Rank 2" in out, out[-4000:]
    assert (tmp_path / "report.html").stat().st_size > 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert {r["rank"]: r["cause"] for r in report["diagnosis"]["slow_ranks"]}.get(2) == "host"
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    traces = tmp_path / "session" / "traces"  # `make demo`: .demo/session/traces
    assert sorted(p.name for p in traces.iterdir() if p.is_file()) == [f"rank{r}.pt.trace.json.gz" for r in range(4)]
    assert (tmp_path / "session" / "report" / "report.html").is_file()
    hta = pytest.importorskip("hta.trace_analysis", reason="HTA comes with the bench dependency group")
    analysis = hta.TraceAnalysis(trace_dir=str(traces))  # unchanged: no renaming, no copying
    assert sorted(analysis.t.traces) == [0, 1, 2, 3]
    assert all(len(frame) > 0 for frame in analysis.t.traces.values())
