"""Flight Recorder dumps are bounded in total, not only per file, and read one rank at a time.

Checks: eight ranks, each with a dump of a few hundred kB that inflates to ~60 MiB (within every per-file bound:
entries, frames, inflated bytes), are analysed by `stepscope analyze` in a child process under 1 GiB peak RSS summed
over the whole process tree; the report is written and names the hang's culprit; the ranks whose dumps do not fit the
analysis's budget are errors naming the limit (`max_flight_recorder_total_bytes`), and the others are used. A dump
over its stored-size limit is refused from its size, before it is read whole.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import subprocess
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fr_dumps import dump, entry

from stepscope_analyzer import limits
from stepscope_analyzer.flight_recorder import load_dumps
from stepscope_analyzer.ranks.storage_io import LocalStore
from stepscope_contract.manifest import RankManifest
from stepscope_contract.report import Report
from stepscope_contract.wire import CaptureState, RankMeta

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MiB, GiB = 1 << 20, 1 << 30
KILL_AT = 1536 * MiB
WORLD = 8
STUCK = 5
FILLER_FRAMES = 60


def _inflating_dump(rank: int, target: int) -> bytes:
    """A hang dump of `rank` (rank STUCK never reached seq 11), padded with completed entries of 60 frames each up
    to about `target` bytes of JSON; compressed in one stream without holding the JSON twice."""
    last = 10 if rank == STUCK else 11
    real = [entry(seq, completed=seq < 11) for seq in range(1, last + 1)]
    doc = dump(rank, real, world=WORLD)
    frames = [{"name": f"f{i}", "filename": f"/m{i}.py", "line": i} for i in range(FILLER_FRAMES)]
    filler = entry(0, group=("7", "filler"))
    filler["frames"] = frames
    piece = json.dumps(filler).encode()
    count = min((target - 4096) // (len(piece) + 1), 49_000)
    head, tail = json.dumps(doc).encode().split(b'"entries": [', 1)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [packer.compress(head + b'"entries": [')]
    batch = b",".join([piece] * 1000) + b","
    for _ in range(count // 1000):
        out.append(packer.compress(batch))
    out.append(packer.compress(tail) + packer.flush())
    return b"".join(out)


def _session(root: Path, target: int) -> Path:
    for rank in range(WORLD):
        folder = root / "ranks" / str(rank)
        folder.mkdir(parents=True)
        hung = rank != STUCK
        meta = RankMeta(
            capture_id="c",
            rank=rank,
            world_size=WORLD,
            pid=100 + rank,
            steps_requested=3,
            steps_captured=0,
            hung=hung,
            dump_reason="hang",
        )
        manifest = RankManifest(
            capture_id="c",
            namespace="ns",
            session="s",
            rank=rank,
            state=CaptureState.HUNG,
            meta=meta,
            capture_started_at=datetime(2026, 1, 1, tzinfo=UTC),
            capture_finished_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        (folder / "manifest.json").write_text(manifest.model_dump_json(by_alias=True))
        (folder / "flight_recorder.json.gz").write_bytes(_inflating_dump(rank, target))
    return root


RUNNER = "import sys\nfrom stepscope_cli.main import main\nsys.exit(main(sys.argv[1:]))\n"


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def _analyze(source: Path, out: Path, timeout: float = 400) -> tuple[int, int, str]:
    cmd = [sys.executable, "-c", RUNNER, "analyze", str(source), "-o", str(out), "--allow-partial"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    watched = psutil.Process(proc.pid)
    peak = 0
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        try:
            peak = max(peak, _tree_rss(watched))
        except psutil.NoSuchProcess:
            break
        if peak > KILL_AT or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"killed: tree RSS {peak >> 20} MiB (limit {KILL_AT >> 20} MiB) or past {timeout} s")
        time.sleep(0.02)
    output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    return int(proc.returncode or 0), peak, output


def test_eight_inflating_dumps_are_analysed_under_1_gib(tmp_path: Path) -> None:
    source = _session(tmp_path / "session", 60 * MiB)
    sizes = [p.stat().st_size for p in source.glob("ranks/*/flight_recorder.json.gz")]
    assert len(sizes) == WORLD and max(sizes) < 1 * MiB
    inflated = len(gzip.decompress((source / "ranks" / "0" / "flight_recorder.json.gz").read_bytes()))
    assert 50 * MiB < inflated < 64 * MiB
    out = tmp_path / "out"
    code, peak, output = _analyze(source, out)
    assert peak < GiB, f"peak RSS of the process tree {peak >> 20} MiB\n{output[-2000:]}"
    report = Report.model_validate_json((out / "report.json").read_bytes())
    assert (out / "report.html").exists(), output
    over = [e for e in report.errors if "max_flight_recorder_total_bytes" in e.message]
    d = report.diagnosis
    assert d.flight_recorder is not None, output[-2000:]
    used = set(d.flight_recorder.ranks)
    assert used and used.isdisjoint({e.rank for e in over})
    assert used | {e.rank for e in over} == set(range(WORLD)), (used, [e.message for e in report.errors])
    assert all("STEPSCOPE_LIMIT_MAX_FLIGHT_RECORDER_TOTAL_BYTES" in e.message for e in over)
    assert code in (0, 3), output
    if STUCK in used:
        assert f"rank {STUCK} never reached it" in d.verdict, d.verdict


def _small(rank: int) -> bytes:
    return gzip.compress(json.dumps(dump(rank, [entry(1)])).encode())


def test_the_budget_is_one_per_analysis(tmp_path: Path) -> None:
    store = LocalStore()
    keys: list[tuple[int, str]] = []
    for rank in range(4):
        path = tmp_path / f"{rank}.json.gz"
        path.write_bytes(_small(rank))
        keys.append((rank, str(path)))
    dumps, errors = load_dumps(store, keys)
    assert sorted(dumps) == [0, 1, 2, 3] and errors == []
    with limits.override(max_flight_recorder_total_entries=2):
        dumps, errors = load_dumps(store, keys)
    assert sorted(dumps) == [0, 1]
    assert [e.rank for e in errors] == [2, 3]
    assert all("max_flight_recorder_total_entries" in e.message and "(dump not used)" in e.message for e in errors)
    with limits.override(max_flight_recorder_total_bytes=1000):
        dumps, errors = load_dumps(store, keys)
    assert dumps == {} and [e.rank for e in errors] == [0, 1, 2, 3]
    assert all("max_flight_recorder_total_bytes=1000" in e.message for e in errors)


def test_repeated_values_are_kept_once_and_the_call_sites_survive(tmp_path: Path) -> None:
    """Compaction keeps what the analysis reads: the same calls (call sites included) from the compacted dump."""
    from stepscope_analyzer.flight_recorder.calls import rank_calls
    from stepscope_analyzer.flight_recorder.dump import Interner, compact, parse_dump

    raw = gzip.compress(json.dumps(dump(0, [entry(seq, completed=seq < 40) for seq in range(1, 41)])).encode())
    parsed = parse_dump(raw)
    interner = Interner()
    compacted = compact(parsed, interner)
    assert rank_calls(0, compacted) == rank_calls(0, parsed)
    assert all(len(e.frames) == 1 for e in compacted.entries)
    first, second = compacted.entries[0], compacted.entries[1]
    assert first.input_sizes is second.input_sizes and first.frames is second.frames
    assert first.profiling_name is second.profiling_name


def test_a_dump_over_its_stored_size_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "big.json.gz"
    path.write_bytes(b"\0" * (2 * MiB))
    read: list[int | None] = []
    original = LocalStore.read

    def spy(self: LocalStore, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        read.append(most)
        return original(self, key, most, truncate)

    monkeypatch.setattr(LocalStore, "read", spy)
    with limits.override(max_flight_recorder_file_bytes=1 * MiB):
        dumps, errors = load_dumps(LocalStore(), [(0, str(path))])
    assert dumps == {} and read == [1 * MiB]
    assert "max_flight_recorder_file_bytes" in errors[0].message
