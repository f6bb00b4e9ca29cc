"""The central analysis of a large session of node summaries, without the cluster: its peak memory, its time against
its floor, and the size of what it writes.

Builds a session folder on the local disk with N ranks as session_scale.py's simulated sidecars leave it: each rank's
gzip trace (the two ranks of HTA's sampled 128-rank trace, hard-linked: the analysis reads a rank's summary, not its
trace), the node summary the sidecar made of it, carrying its manifest, and the manifest. Two summaries are computed
(one per source trace); every rank's own is that document with its own numbers: each time of it (step times, phases,
the time breakdown, kernels' and functions' times) scaled by the rank's factor, within +-2% of 1; one planted slow
rank (on one node, 8 ranks a node) computes twice as long and waits in collectives that much less (its peers wait for
it: the step's wall time is the job's). Then it runs `stepscope analyze` on the folder (every summary
read, the ranks compared, report.json, ranks.csv.gz and report.html written) and, apart, the floor: a process that
reads and decodes the same summaries (contract NodeSummary), nothing else. It prints the peak RSS of the whole process
tree (every process of it, sampled), the wall time and its ratio to the floor, the sizes of report.json, ranks.csv.gz
and report.html, and whether the planted rank and its node are named; against the bars of the analyzer pod (1 GiB,
report.json 32 MB, report.html 4 MB, 3x the floor).

Usage: python bench/reduce_memory.py --ranks 4096 [--keep DIR] [--traces DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from stepscope_contract.manifest import ArtifactFile, RankManifest
from stepscope_contract.storage import MANIFEST_FILE, RANK_SUMMARY_FILE, TRACE_FILE, trace_name
from stepscope_contract.wire import CaptureState, RankMeta

REPO = Path(__file__).resolve().parents[1]
TRACE_DIRS = [REPO.parent / "shared" / "data" / "traces" / "hta", Path("/work/shared/data/traces/hta")]
SOURCES = ["sampled_128rank_rank0.json.gz", "sampled_128rank_rank1.json.gz"]
BAR_MB, BAR_JSON_MB, BAR_HTML_MB, BAR_FLOOR = 1024.0, 32.0, 4.0, 3.0
RANKS_PER_NODE = 8
SLOWER = 2.0
_DIST = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*\}')
_TIME_OF_DAY = {"captured_from_unix_s", "captured_to_unix_s"}
_PHASES = {"data_loading", "forward", "backward", "optimizer", "communication_wait", "other"}
_COMPUTE = {"forward", "backward", "optimizer", "compute_time", "kernel_time"}
_WAIT = {"communication_wait", "collective_wait_time"}
_SLOT = "\x00"
_RANK, _MANIFEST = "\x01rank\x01", "\x01manifest\x01"


def planted(ranks: int) -> int:
    """The planted slow rank: off the first and last node."""
    return (ranks * 5) // 7


def factor(rank: int) -> float:
    return 1.0 + 0.04 * (((rank * 2654435761) % 1000) / 1000.0 - 0.5)


def _trace(source: Path, rank: int, world: int) -> bytes:
    text = gzip.decompress(source.read_bytes()).decode()
    info = json.dumps({"backend": "nccl", "rank": rank, "world_size": world})
    return gzip.compress(_DIST.sub(f'"distributedInfo": {info}', text, count=1).encode(), compresslevel=1)


def _summary(trace: bytes, rank: int) -> dict[str, object]:
    from stepscope_analyzer.ranks.node_summaries import summarise_trace

    node = summarise_trace(trace, rank, 50, "c-bench")
    return json.loads(node.model_dump_json(by_alias=True, exclude_none=True))  # type: ignore[no-any-return]


def _is_time(key: str, parent: str) -> bool:
    return key not in _TIME_OF_DAY and (
        key.endswith(("_us", "_time")) or key in _PHASES or parent in ("durations_us", "step_ops_outside_work")
    )


def _slotted(value: object, values: list[tuple[float, str]], key: str = "", parent: str = "") -> object:
    """`value` with every time replaced by a slot (its value and kind, compute | wait | other, appended to
    `values`)."""
    if isinstance(value, dict):
        return {k: _slotted(v, values, k, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_slotted(v, values, key, key) for v in value]
    if isinstance(value, float) and _is_time(key, parent):
        values.append((value, "compute" if key in _COMPUTE else "wait" if key in _WAIT else "other"))
        return _SLOT
    return value


class Template:
    """A summary's JSON cut at its times, so that each rank's own is written fast."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.values: list[tuple[float, str]] = []
        text = json.dumps(_slotted(doc, self.values), separators=(",", ":"))
        self.parts = text.split(json.dumps(_SLOT))
        assert len(self.parts) == len(self.values) + 1
        phases = doc["summary"].get("phases") or {}
        compute = sum(phases.get(p, 0.0) for p in ("forward", "backward", "optimizer"))
        wait = phases.get("communication_wait", 0.0)
        self.slow = {"compute": SLOWER, "wait": max(0.05, 1 - (SLOWER - 1) * compute / wait) if wait else 1.0,
                     "other": 1.0}  # fmt: skip

    def render(self, scale: float, slow: bool) -> str:
        out = [self.parts[0]]
        for (value, kind), part in zip(self.values, self.parts[1:], strict=True):
            out.append(repr(round(value * scale * (self.slow[kind] if slow else 1.0), 3)))
            out.append(part)
        return "".join(out)


def build_folder(folder: Path, ranks: int, traces_dir: Path) -> None:
    """The session folder: traces/rank<R>.pt.trace.json.gz and traces/rank<R>/{summary.json, manifest.json}."""
    sources = [_trace(traces_dir / s, i, ranks) for i, s in enumerate(SOURCES)]
    now = datetime.now(UTC)
    traces = folder / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    originals = []
    for i, data in enumerate(sources):
        original = folder / f"source{i}.pt.trace.json.gz"
        original.write_bytes(data)
        originals.append(original)
    recorded_of = [
        ArtifactFile(name=TRACE_FILE, size=len(data), sha256=hashlib.sha256(data).hexdigest()) for data in sources
    ]
    templates = []
    for i, data in enumerate(sources):
        doc = _summary(data, i)
        doc.update(rank=_RANK, manifest=_MANIFEST)
        doc["summary"]["rank"] = _RANK  # type: ignore[index]
        templates.append(Template(doc))
    for rank in range(ranks):
        rank_dir = traces / f"rank{rank}"
        rank_dir.mkdir(exist_ok=True)
        os.link(originals[rank % len(originals)], traces / trace_name(rank))  # what its summary is bound to
        recorded = recorded_of[rank % len(recorded_of)]
        manifest = RankManifest(
            capture_id="c-bench", namespace="default", session="bench", pod=f"train-{rank}",
            node=f"node-{rank // RANKS_PER_NODE}", rank=rank, state=CaptureState.UPLOADED, capture_started_at=now,
            capture_finished_at=now, files=[recorded],
            meta=RankMeta(capture_id="c-bench", rank=rank, world_size=ranks, pid=1, steps_requested=3,
                          steps_captured=3),
        )  # fmt: skip
        (rank_dir / MANIFEST_FILE).write_text(manifest.model_dump_json(by_alias=True, indent=1))
        text = templates[rank % len(templates)].render(factor(rank), rank == planted(ranks))
        carried = manifest.model_dump_json(by_alias=True, exclude_none=True)  # as the sidecar
        text = text.replace(json.dumps(_RANK), str(rank)).replace(json.dumps(_MANIFEST), carried)
        (rank_dir / RANK_SUMMARY_FILE).write_text(text)
        if rank % 4096 == 4095:
            print(f"  {rank + 1} ranks written", flush=True)


class TreePeak:
    """The peak of the summed RSS of a process and all its descendants, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                tree = [self.root, *self.root.children(recursive=True)]
                total = 0
                for p in tree:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
                self.peak = max(self.peak, total)
            except psutil.Error:
                return
            self._stop.wait(0.02)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak / 2**20


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    """CPU seconds of the process tree: on a shared machine, what the wall time would be alone (one core)"""
    peak_mib: float
    done: subprocess.CompletedProcess[str]


def _timed(command: list[str]) -> Run:
    """Wall and CPU seconds, peak MiB of the process tree, and the result of `command`."""
    started, cpu = time.perf_counter(), _cpu()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        peak = TreePeak(proc.pid)
        out, err = proc.communicate()
        elapsed = time.perf_counter() - started
        mib = peak.stop()
    return Run(elapsed, _cpu() - cpu, mib, subprocess.CompletedProcess(command, proc.returncode, out, err))


FLOOR = """
import sys
from pathlib import Path
from stepscope_contract.analysis_documents import NodeSummary
n = 0
for path in sorted(Path(sys.argv[1]).glob("rank*/summary.json")):
    NodeSummary.model_validate_json(path.read_bytes())
    n += 1
print(n)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--keep", type=Path, default=None, help="build the folder here (reused when it exists)")
    parser.add_argument("--traces", type=Path, default=None, help="the folder of HTA's sampled 128-rank traces")
    args = parser.parse_args()
    traces_dir = args.traces or next((d for d in TRACE_DIRS if (d / SOURCES[0]).is_file()), TRACE_DIRS[0])
    folder = args.keep or Path(tempfile.mkdtemp(prefix="stepscope-reduce-"))
    if not (folder / "traces").is_dir():
        print(f"building {args.ranks} ranks in {folder} ...", flush=True)
        build_folder(folder, args.ranks, traces_dir)
    out = folder.with_name(folder.name + "-report")
    command = [str(Path(sys.executable).parent / "stepscope"), "analyze", str(folder), "-o", str(out)]
    floor = _timed([sys.executable, "-c", FLOOR, str(folder / "traces")])
    run = _timed(command)
    done, peak, elapsed = run.done, run.peak_mib, run.wall_s
    if done.returncode != 0 or floor.done.returncode != 0:
        print(done.stderr[-3000:], floor.done.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    sizes = {name: (out / name).stat().st_size / 2**20 for name in ("report.json", "ranks.csv.gz", "report.html")}
    slow = planted(args.ranks)
    named = [s["rank"] for s in report["diagnosis"]["slow_ranks"]]
    node = f"node-{slow // RANKS_PER_NODE}"
    print(f"{args.ranks} ranks: stepscope analyze exit {done.returncode}: {report['diagnosis']['verdict']}")
    print(f"  planted slow rank {slow} on {node}: named {slow in named[:1]}, its node in the verdict "
          f"{node in report['diagnosis']['verdict']}; {len(report['ranks'])} ranks in report.json")  # fmt: skip
    print(f"  wall {elapsed:.1f} s (CPU {run.cpu_s:.1f} s)   floor: read + decode {floor.done.stdout.strip()} "
          f"summaries {floor.wall_s:.1f} s (CPU {floor.cpu_s:.1f} s)   ratio wall {elapsed / floor.wall_s:.2f}, CPU "
          f"{run.cpu_s / floor.cpu_s:.2f} (bar {BAR_FLOOR:.0f})")  # fmt: skip
    print(f"  peak RSS of the process tree {peak:.0f} MiB (floor's {floor.peak_mib:.0f} MiB)   bar {BAR_MB:.0f} MiB   "
          f"ratio {peak / BAR_MB:.2f}")  # fmt: skip
    print(f"  report.json {sizes['report.json']:.2f} MiB (bar {BAR_JSON_MB:.0f})   ranks.csv.gz "
          f"{sizes['ranks.csv.gz']:.2f} MiB   report.html {sizes['report.html']:.2f} MiB "
          f"(bar {BAR_HTML_MB:.0f})")  # fmt: skip
    ok = done.returncode == 0 and slow in named[:1] and peak <= BAR_MB and elapsed <= BAR_FLOOR * floor.wall_s
    return 0 if ok and sizes["report.json"] <= BAR_JSON_MB and sizes["report.html"] <= BAR_HTML_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
