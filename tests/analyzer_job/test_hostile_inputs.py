"""`stepscope analyze` of hostile inputs, in a separate process whose memory is watched (and which is killed past
1.5 GiB, so a regression cannot take the machine down):
- a folder with gzip bombs (2 MB that inflate to 2 GiB of zeros, in one gzip member and in many), 2 GiB of
  whitespace inside traceEvents, a trace claiming world size 2,000,000 and one with absurd durations, beside two
  good ranks: peak RSS under 1 GiB, the good ranks analysed, every hostile rank named with the limit it broke;
- a session whose manifest claims world size 1,000,000 (within the limits): missing ranks summarised as one range,
  report.json small; one claiming 2,000,000: refused by name. Both finish within the subprocess timeout."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import psutil
import pytest

from stepscope_contract.report import RankStatus, Report

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GiB = 1 << 30
KILL_AT = 1536 << 20
# the analysis runs in a child that reports its own peak RSS (KiB) on the last line of stdout
RUNNER = """
import resource, sys
from stepscope_cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print("PEAK_RSS_KIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
sys.exit(code)
"""


def _gzip_members(*parts: tuple[bytes, int]) -> bytes:
    """Concatenated gzip members: each (chunk, times) compressed once and repeated (cheap to make, GiBs inflated)."""
    out = bytearray()
    for chunk, times in parts:
        member = gzip.compress(chunk, compresslevel=9)
        out += member * times
    return bytes(out)


def _one_member(chunk: bytes, times: int) -> bytes:
    """One gzip member of `chunk` repeated `times` times (the shape of the reported bomb: 2 MB -> 2 GiB)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = bytearray()
    for _ in range(times):
        out += deflate.compress(chunk)
    return bytes(out + deflate.flush())


def _event(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _small_trace(rank: int, world_size: int, dur: float = 10.0) -> bytes:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": i * 100, "dur": 90}
        for i in range(3)
    ] + [_event("aten::mm", i * 100 + 5, dur) for i in range(3)]
    doc = {"distributedInfo": {"rank": rank, "world_size": world_size, "backend": "gloo"}, "traceEvents": events}
    return gzip.compress(json.dumps(doc).encode())


def _analyze(source: Path, out: Path, timeout: float = 240) -> tuple[int, int, str]:
    """(exit code, peak RSS in bytes, output) of `stepscope analyze source -o out`; killed past KILL_AT."""
    cmd = [sys.executable, "-c", RUNNER, "analyze", str(source), "-o", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    watched = psutil.Process(proc.pid)
    peak = 0
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        if peak > KILL_AT or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"killed: RSS {peak >> 20} MiB (limit {KILL_AT >> 20} MiB) or past {timeout} s")
        time.sleep(0.02)
    output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    for line in output.splitlines():
        if line.startswith("PEAK_RSS_KIB"):
            peak = max(peak, int(line.split()[1]) * 1024)
    return int(proc.returncode or 0), peak, output


def test_a_folder_of_bombs_is_analysed_under_1_gib_with_the_good_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(
            (FIXTURES / f"gloo_2rank_rank{rank}.pt.trace.json.gz").read_bytes()
        )
    zeros = _gzip_members((b"\0" * (64 << 20), 32))  # 2 GiB of zeros
    head = (
        b'{"distributedInfo": {"rank": 3, "world_size": 2}, "traceEvents": [' + json.dumps(_event("a", 1, 1)).encode()
    )
    spaces = _gzip_members(
        (head + b",", 1), (b" " * (64 << 20), 32), (json.dumps(_event("b", 2, 1)).encode() + b"]}", 1)
    )
    assert len(zeros) < 3 << 20 and len(spaces) < 3 << 20
    (folder / "rank2.pt.trace.json.gz").write_bytes(zeros)
    (folder / "rank3.pt.trace.json.gz").write_bytes(spaces)
    (folder / "rank4.pt.trace.json.gz").write_bytes(_small_trace(4, 2_000_000))
    (folder / "rank5.pt.trace.json.gz").write_bytes(_small_trace(5, 2, dur=1e15))
    (folder / "rank6.pt.trace.json.gz").write_bytes(_one_member(b"\0" * (64 << 20), 32))
    out = tmp_path / "out"
    code, peak, output = _analyze(folder, out)
    assert code == 0, output
    assert peak < GiB, f"peak RSS {peak >> 20} MiB"
    report = Report.model_validate_json((out / "report.json").read_bytes())
    by_name = {e.source.rsplit("/", 1)[-1]: e.message for e in report.errors if e.source}
    ok = sorted(r.rank for r in report.ranks if r.status is RankStatus.OK)
    assert ok == [0, 1], (ok, by_name)
    bomb = by_name["rank2.pt.trace.json.gz"]  # refused at its first inflated bytes, or at a limit
    assert "not a JSON trace" in bomb or "max_inflate_ratio" in bomb or "max_whole_parse_bytes" in bomb, by_name
    assert (
        "max_event_bytes" in by_name["rank3.pt.trace.json.gz"]
        or "max_inflate_ratio" in by_name["rank3.pt.trace.json.gz"]
    ), by_name
    bomb = by_name["rank6.pt.trace.json.gz"]
    assert "not a JSON trace" in bomb or "max_inflate_ratio" in bomb or "max_whole_parse_bytes" in bomb, by_name
    assert "max_world_size" in by_name["rank4.pt.trace.json.gz"], by_name
    assert "max_event_duration_us" in by_name["rank5.pt.trace.json.gz"], by_name
    assert "STEPSCOPE_LIMIT_" in by_name["rank4.pt.trace.json.gz"]


def _session(root: Path, world_size: int) -> Path:
    rank_dir = root / "ranks" / "0"
    rank_dir.mkdir(parents=True)
    (rank_dir / "trace.pt.trace.json.gz").write_bytes((FIXTURES / "gloo_2rank_rank0.pt.trace.json.gz").read_bytes())
    manifest = {
        "captureId": "cap-1",
        "namespace": "ns",
        "session": "s",
        "rank": 0,
        "state": "uploaded",
        "meta": {"captureId": "cap-1", "rank": 0, "worldSize": world_size, "pid": 1, "stepsRequested": 3,
                 "stepsCaptured": 3},
    }  # fmt: skip
    (rank_dir / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_a_huge_claimed_world_size_costs_ranges_not_ranks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, peak, output = _analyze(_session(tmp_path / "million", 1_000_000), out, timeout=60)
    assert code == 0, output
    raw = (out / "report.json").read_bytes()
    report = Report.model_validate_json(raw)
    assert len(raw) < 1 << 20, len(raw)
    assert report.missing_ranks == "1-999999"
    assert len([r for r in report.ranks if r.status is RankStatus.MISSING]) <= 256
    assert any("999999 ranks" in e.message for e in report.errors), report.errors[-3:]
    assert peak < GiB


def test_a_world_size_beyond_the_limit_is_refused_by_name(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, output = _analyze(_session(tmp_path / "two-million", 2_000_000), out, timeout=60)
    assert code == 0, output
    report = Report.model_validate_json((out / "report.json").read_bytes())
    assert any("max_world_size" in e.message and "2000000" in e.message for e in report.errors), report.errors
    assert report.ranks[0].status is RankStatus.OK and report.missing_ranks in ("", "1")


def test_the_bombs_are_what_they_claim() -> None:
    assert len(zlib.decompress(_one_member(b"ab", 3), 31)) == 6
    assert gzip.decompress(_gzip_members((b"ab", 3))) == b"ababab"
