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
    pytest.mark.timeout(1100),
    pytest.mark.skipif(
        importlib.util.find_spec("stepscope_operator.main") is None, reason="the operator component is not installed"
    ),
]


def test_demo_names_the_planted_slow_rank(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "stepscope"),
            "demo",
            "--workdir",
            str(tmp_path),
            # generous deadlines: on a busy machine each step takes longer, never the verdict differs
            "--ready-timeout",
            "300",
            "--operator-health-timeout",
            "240",
            "--timeout",
            "480",
        ],
        capture_output=True,
        text=True,
        timeout=1000,
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


@pytest.mark.parametrize(
    ("mode", "verdict"),
    [
        ("hang", "verdict: Hang: ranks 0, 1, 3 wait in all_reduce"),
        ("desync", "verdict: Desync (collective mismatch): rank 2 called broadcast [1024] where ranks 0, 1, 3 called"),
    ],
)
def test_demo_names_the_rank_that_holds_the_job_still(tmp_path: Path, mode: str, verdict: str) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "stepscope"), "demo", "--workdir", str(tmp_path), "--slow-mode", mode],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:] + (tmp_path / "operator.log").read_text()[-4000:]
    assert verdict in out, out[-4000:]
    report = json.loads((tmp_path / "report.json").read_text())
    d = report["diagnosis"]
    assert [(s["rank"], s["cause"]) for s in d["slow_ranks"]] == [(2, "hang")]
    if mode == "hang":
        assert "rank 2 never reached it: it is stuck at train_ddp.py" in d["verdict"] and "wait_forever" in d["verdict"]
        [front] = d["flight_recorder"]["wavefronts"]
        assert front["missing_ranks"] == [2] and front["collective"]["call_site"].startswith("train_ddp.py:")
    else:
        assert d["flight_recorder"]["mismatches"][0]["ranks"] == [2]
    assert {h["rank"]: h["culprit"] for h in d["hangs"]} == {0: False, 1: False, 2: True, 3: False}
