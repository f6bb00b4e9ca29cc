"""`stepscope demo` end to end (needs the operator): the verdict names the planted rank and is told once; the
session's folder is kept beside the report, and HTA loads its traces folder as it is; nothing is left running. A
slow-rank variant (host) and a standstill variant (desync) run here, each taking its own path through the operator
and the demo's output. The compute variant takes the host variant's path and the hang variant the desync variant's;
a hang through the real operator on the local cluster is tests/e2e/test_scenarios.py's (status, targets, verdict),
and what the compute and hang sessions show is checked on their recorded sessions
(tests/analyzer_job/test_demo_sessions.py, tests/analyzer_job/report/test_demo_reports_in_browser.py)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyzer_job" / "report"))

from browser_probe import ensure_chromium, probe

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(1100),
    pytest.mark.skipif(
        importlib.util.find_spec("stepscope_operator.main") is None, reason="the operator component is not installed"
    ),
]


def _columns(out: str, cause: str, bottleneck: str) -> None:
    """The last row `kubectl get profilesessions -w` printed has the CAUSE and BOTTLENECK columns given."""
    rows = [line for line in out.splitlines() if re.match(r"^\s+demo\s+\S*Succeeded\s", line)]
    assert rows, out[-3000:]
    assert re.search(rf"\s{cause}\s+{re.escape(bottleneck)}(\s|$)", rows[-1]), rows[-1]


def _in_browser(tmp_path: Path) -> dict[str, Any]:
    """The session folder's report.html (its links work there) as headless Chromium shows it: no empty section."""
    chromium, why = ensure_chromium()
    if chromium is None:
        pytest.skip(why)
    seen: dict[str, Any] = probe(chromium, tmp_path / "session" / "report" / "report.html")
    empty = [s["title"] for s in seen["sections"] if not s["visible"] or s["contentHeight"] < 10]
    assert not empty, empty
    ids = {s["id"] for s in seen["sections"]}
    if "ranks" in ids and "holds the job up" not in seen["text"]:  # the ranks ran: their timeline and memory
        assert "timeline" in ids and seen["timelineRects"] >= 8, ids
        assert "memory" in ids and seen["memoryMarks"] >= 4, ids  # the demo's session records memory
    return seen


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
    assert "pods Ready: ddp-train-0-" in out and "profilesession.stepscope.dev/demo created" in out, out[-4000:]
    phases = [line.split()[1] for line in out.splitlines() if re.match(r"^\s+demo\s+\S", line)]
    assert "Analyzing" in phases and phases[-1] == "Succeeded", phases  # `kubectl get -w`: each change, in order
    assert (tmp_path / "report.html").stat().st_size > 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert {r["rank"]: r["cause"] for r in report["diagnosis"]["slow_ranks"]}.get(2) == "host"
    told = report["diagnosis"]["verdict"][:80]
    assert out.count(told) == 1, out[-4000:]  # the verdict, once
    _columns(out, "host", "load_batch")  # where rank 2 spends its excess, not where the others wait for it
    (slow,) = [s for s in report["diagnosis"]["slow_ranks"] if s["rank"] == 2]  # the planted line, from sampled stacks
    (top, *_) = slow["python_lines"]  # the script as the pod runs it: <its folder>/train_ddp.py
    assert top["function"] == "load_batch" and top["file"].endswith("/train_ddp.py")
    assert top["peers_ms_per_step"] * 2 <= top["ms_per_step"]
    seen = _in_browser(tmp_path)
    assert "Rank 2 spends " in seen["text"] and "of load_batch per step" in seen["text"]
    assert seen["timelineRects"] >= 8 and "rank 2" in seen["timelineLabels"]
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    traces = tmp_path / "session" / "traces"  # `make demo`: .demo/session/traces
    assert sorted(p.name for p in traces.iterdir() if p.is_file()) == [f"rank{r}.pt.trace.json.gz" for r in range(4)]
    assert (tmp_path / "session" / "report" / "report.html").is_file()
    merged = tmp_path / "session" / "report" / "merged"  # the analyzer Job's merged trace, alone in its folder
    assert [p.name for p in merged.iterdir()] == ["merged.pt.trace.json.gz"]
    hta = pytest.importorskip("hta.trace_analysis", reason="HTA comes with the bench dependency group")
    analysis = hta.TraceAnalysis(trace_dir=str(traces))  # unchanged: no renaming, no copying
    assert sorted(analysis.t.traces) == [0, 1, 2, 3]
    assert all(len(frame) > 0 for frame in analysis.t.traces.values())


def test_demo_names_the_rank_that_holds_the_job_still(tmp_path: Path) -> None:
    mode, bottleneck = "desync", "broadcast at train_ddp.py:"
    verdict = "verdict: Desync (collective mismatch): rank 2 called broadcast [1024] where ranks 0, 1, 3 called"
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
    assert [(s["rank"], s["cause"]) for s in d["slow_ranks"]] == [(2, mode)]
    rows = [line for line in out.splitlines() if re.match(r"^\s+demo\s+\S*Succeeded\s", line)]
    assert rows and re.search(rf"\s{mode}\s+{re.escape(bottleneck)}", rows[-1]), rows[-1:]
    assert re.search(r"Succeeded\s+0/4, rank 2 desynced, 3 waiting\s", rows[-1]), rows[-1]  # CAPTURED column
    told = dict(re.findall(r"target \S+ \(rank (\d)\): (\w+)\b", out))  # the culprit Desync, the others Waiting
    assert told == {"0": "Waiting", "1": "Waiting", "2": "Desync", "3": "Waiting"}, out[-3000:]
    waiting = re.findall(r"Waiting: waits for rank 2 in all_reduce at train_ddp\.py:\d+", out)
    assert len(waiting) == 1 and "(ranks 0" in out, out[-3000:]  # the three waiting ranks' reason, told once
    seen = _in_browser(tmp_path)
    assert "rank 2 holds the job up; ranks 0, 1, 3 wait for it" in seen["text"]
    assert len(seen["artifacts"]) == 8 and all(a["exists"] for a in seen["artifacts"]), seen["artifacts"]
    assert d["flight_recorder"]["mismatches"][0]["ranks"] == [2]
    assert {h["rank"]: h["culprit"] for h in d["hangs"]} == {0: False, 1: False, 2: True, 3: False}
    env = seen["text"][seen["text"].rindex("Environment") :]
    assert importlib.metadata.version("torch") in env, env[:2000]  # the hung ranks' torch, from their manifests
