"""Node summaries a hostile or broken pod could upload cost only their own rank a central parse: `stepscope analyze`
of a recorded 8-rank job (rank 5 slow) whose other ranks' summaries are a 63 MiB document, 4 MiB of empty step
phases, 16 MiB of floats, a 200k-point memory series, NaN step times and an Infinity (hostile_summaries.SIZE_CASES),
or swapped, copied and replayed ones (BINDING_CASES). Each is refused with its reason in the rank's errors, the rank's
trace is parsed instead, every rank is analysed, the slow rank is still named, and the whole process tree of the
command stays under 512 MiB (sampled with psutil: the analyzer and its workers together)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_summaries import BINDING_CASES, SIZE_CASES, SLOW_RANK, build

pytestmark = pytest.mark.integration
MiB = 1 << 20
BAR = 512 * MiB
NAN = re.compile(r"(?<![\w-])nan(?![\w-])", re.IGNORECASE)


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def analyze(folder: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """`stepscope analyze FOLDER -o OUT` and the largest RSS of its process tree seen (sampled every 20 ms)."""
    command = [str(Path(sys.executable).parent / "stepscope"), "analyze", str(folder), "-o", str(out)]
    popen = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = psutil.Process(popen.pid)
    peak = 0
    while popen.poll() is None:
        peak = max(peak, tree_rss(proc))
        time.sleep(0.02)
    stdout, stderr = popen.communicate()
    return subprocess.CompletedProcess(command, popen.returncode, stdout, stderr), peak


def _check(tmp_path: Path, cases: tuple[str, ...], reasons: dict[int, str]) -> None:
    build(tmp_path / "job", cases)
    done, peak = analyze(tmp_path / "job", tmp_path / "out")
    assert done.returncode in (0, 2), done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["status"] for r in report["ranks"]] == ["ok"] * 8  # every rank analysed (the refused ones parsed)
    assert [s["rank"] for s in report["diagnosis"]["slow_ranks"]][:1] == [SLOW_RANK], report["diagnosis"]["verdict"]
    refused = {e["rank"]: e["message"] for e in report["errors"] if e["message"].startswith("node summary refused")}
    assert sorted(refused) == sorted(reasons), refused
    for rank, reason in reasons.items():
        assert reason in refused[rank], (rank, refused[rank])
    page = (tmp_path / "out" / "report.html").read_text()
    shown = sum(len(NAN.findall(m)) for m in refused.values())  # the refusals' own words ("NaN in the document")
    assert len(NAN.findall(page)) == shown  # no number of the page is NaN
    assert peak < BAR, f"peak {peak / MiB:.0f} MiB"


def test_oversized_and_non_finite_summaries_are_refused_within_the_memory_bar(tmp_path: Path) -> None:
    assert SIZE_CASES == ("63mib", "empty-phases-4mib", "floats-16mib", "memory-200k", "nan-steps", "inf")
    reasons = {
        1: "beyond the limit max_node_summary_bytes",  # from its stored size, before it is read
        2: "beyond the limit max_node_summary_values",  # counted on the bytes, before decoding
        3: "beyond the limit max_node_summary_bytes",
        4: "beyond the limit max_node_summary_values",  # 3 x 200k points (one list alone: MAX_MEMORY_POINTS)
        6: "NaN in the document: numbers must be finite",
        7: "Infinity in the document: numbers must be finite",
    }
    _check(tmp_path, SIZE_CASES, reasons)


def test_swapped_copied_and_replayed_summaries_are_refused(tmp_path: Path) -> None:
    assert BINDING_CASES == ("swapped", "copied", "replayed")
    reasons = {
        0: "it was made from a trace of",  # rank 2's, relabelled: the trace beside it is another
        2: "it was made from a trace of",
        SLOW_RANK: "it was made from a trace of",  # a healthy rank's summary: the slow rank is named all the same
        6: "it was made in capture cap-earlier, this session's is",
    }
    _check(tmp_path, BINDING_CASES, reasons)
