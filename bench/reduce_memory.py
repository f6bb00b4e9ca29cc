"""The central analysis of a large session of node summaries, without the cluster: its peak memory and time.

Builds a session folder on the local disk with N ranks as session_scale.py's simulated sidecars leave it (each
rank's gzip trace, the node summary the sidecar made of it, carrying its manifest, and the manifest), the traces
being the two ranks of HTA's sampled 128-rank trace reused round-robin with their distributedInfo rewritten; only two
summaries are computed (one per source trace), every other rank's is the same document with its own rank. Then runs
`stepscope analyze` on the folder (the node summaries read, the diagnosis, report.json and report.html written) and
prints its peak RSS and wall time, against the analyzer pod's bar (1 GiB).

Usage: python bench/reduce_memory.py --ranks 4096 [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from stepscope_contract.manifest import ArtifactFile, RankManifest
from stepscope_contract.storage import MANIFEST_FILE, RANK_SUMMARY_FILE, TRACE_FILE, trace_name
from stepscope_contract.wire import CaptureState, RankMeta

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces" / "hta"
SOURCES = [TRACES / "sampled_128rank_rank0.json.gz", TRACES / "sampled_128rank_rank1.json.gz"]
BAR_MB = 1024.0
_DIST = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*\}')


def _trace(source: Path, rank: int, world: int) -> bytes:
    text = gzip.decompress(source.read_bytes()).decode()
    info = json.dumps({"backend": "nccl", "rank": rank, "world_size": world})
    return gzip.compress(_DIST.sub(f'"distributedInfo": {info}', text, count=1).encode(), compresslevel=1)


def _summary(trace: bytes, rank: int) -> dict[str, object]:
    from stepscope_analyzer.ranks.node_summaries import summarise_trace

    node = summarise_trace(trace, rank, 50, "c-bench")
    return json.loads(node.model_dump_json(by_alias=True, exclude_none=True))  # type: ignore[no-any-return]


def build_folder(folder: Path, ranks: int) -> None:
    """The session folder: traces/rank<R>.pt.trace.json.gz and traces/rank<R>/{summary.json, manifest.json}."""
    sources = [_trace(s, i, ranks) for i, s in enumerate(SOURCES)]
    templates = [_summary(t, i) for i, t in enumerate(sources)]
    now = datetime.now(UTC)
    traces = folder / "traces"
    for rank in range(ranks):
        rank_dir = traces / f"rank{rank}"
        rank_dir.mkdir(parents=True, exist_ok=True)
        (traces / trace_name(rank)).write_bytes(sources[rank % len(sources)])  # what its summary is bound to
        trace = sources[rank % len(sources)]
        recorded = ArtifactFile(name=TRACE_FILE, size=len(trace), sha256=hashlib.sha256(trace).hexdigest())
        manifest = RankManifest(
            capture_id="c-bench", namespace="default", session="bench", pod=f"train-{rank}", node=f"node-{rank // 8}",
            rank=rank, state=CaptureState.UPLOADED, capture_started_at=now, capture_finished_at=now, files=[recorded],
            meta=RankMeta(capture_id="c-bench", rank=rank, world_size=ranks, pid=1, steps_requested=3,
                          steps_captured=3),
        )  # fmt: skip
        (rank_dir / MANIFEST_FILE).write_text(manifest.model_dump_json(by_alias=True, indent=1))
        doc = json.loads(json.dumps(templates[rank % len(templates)]))
        doc["rank"] = rank
        doc["summary"]["rank"] = rank
        doc["manifest"] = json.loads(manifest.model_dump_json(by_alias=True, exclude_none=True))  # as the sidecar
        (rank_dir / RANK_SUMMARY_FILE).write_text(json.dumps(doc, separators=(",", ":")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--keep", type=Path, default=None, help="build the folder here (reused when it exists)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="stepscope-reduce-"))
    if not (folder / "traces").is_dir():
        print(f"building {args.ranks} ranks in {folder} ...", flush=True)
        build_folder(folder, args.ranks)
    out = folder.with_name(folder.name + "-report")
    command = [str(Path(sys.executable).parent / "stepscope"), "analyze", str(folder), "-o", str(out)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        print(done.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    print(f"{args.ranks} ranks: stepscope analyze {elapsed:.1f} s, exit {done.returncode}, "
          f"{len(report['ranks'])} ranks in report.json ({(out / 'report.json').stat().st_size / 2**20:.0f} MB), "
          f"report.html {(out / 'report.html').stat().st_size / 2**20:.1f} MB")  # fmt: skip
    print(f"peak RSS {peak:.0f} MB   bar {BAR_MB:.0f} MB   ratio {peak / BAR_MB:.2f}")
    return 0 if peak <= BAR_MB and done.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
