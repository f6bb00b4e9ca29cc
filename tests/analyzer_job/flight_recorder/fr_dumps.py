"""The Flight Recorder fixtures (real 4-rank gloo runs, see fixtures/make_flight_recorder_dumps.py) and a small
generator of dumps in PyTorch's layout for the cases no real run here can make."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from stepscope_analyzer.flight_recorder import Dump, parse_dump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flight_recorder"
TRAIN = Path(__file__).resolve().parents[2] / "sidecar" / "train_faults.py"
NOW_NS = 1_800_000_000_000_000_000


def site(tag: str) -> str:
    """'train_faults.py:<line> in <function>' of the line marked `# site: <tag>` in the training script."""
    function = "?"
    for number, line in enumerate(TRAIN.read_text().splitlines(), 1):
        match = re.match(r"def (\w+)\(", line)
        if match:
            function = match.group(1)
        if line.rstrip().endswith(f"# site: {tag}"):
            return f"train_faults.py:{number} in {function}"
    raise AssertionError(f"no '# site: {tag}' in {TRAIN}")


def fixture_dumps(fault: str) -> dict[int, Dump]:
    folder = FIXTURES / fault
    return {int(p.parent.name): parse_dump(p.read_bytes()) for p in sorted(folder.glob("*/flight_recorder.json.gz"))}


def fixture_raw(fault: str) -> dict[int, dict[str, Any]]:
    folder = FIXTURES / fault
    return {
        int(p.parent.name): json.loads(gzip.decompress(p.read_bytes()))
        for p in sorted(folder.glob("*/flight_recorder.json.gz"))
    }


def entry(
    seq: int,
    op: str = "all_reduce",
    sizes: list[list[int]] | None = None,
    dtype: str = "Float",
    group: tuple[str, str] = ("0", "default_pg"),
    completed: bool = True,
    age_s: float = 30.0,
    site_line: int = 52,
) -> dict[str, Any]:
    sizes = [[4]] if sizes is None else sizes
    return {
        "record_id": seq,
        "pg_id": int(group[0]) if group[0].isdigit() else 0,
        "process_group": list(group),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"gloo:{op}",
        "time_created_ns": NOW_NS - int(age_s * 1e9),
        "input_sizes": sizes,
        "input_dtypes": [dtype] * len(sizes),
        "output_sizes": sizes,
        "output_dtypes": [dtype] * len(sizes),
        "state": "completed" if completed else "scheduled",
        "retired": completed,
        "is_p2p": False,
        "frames": [
            {
                "name": op,
                "filename": "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
                "line": 1,
            },
            {"name": "step", "filename": "/app/train.py", "line": site_line},
        ],
    }


def dump(
    rank: int,
    entries: list[dict[str, Any]],
    world: int = 4,
    reason: str = "hang",
    groups: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "version": "2.10",
        "pg_config": {"": {"name": "", "desc": "", "ranks": "[]"}},
        "pg_status": {},
        "entries": entries,
        "stepscope": {
            "rank": rank,
            "worldSize": world,
            "reason": reason,
            "dumpedAtNs": NOW_NS,
            "processGroups": groups or {"0": {"desc": "default_pg", "ranks": list(range(world))}},
        },
    }


def encode(doc: dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps(doc).encode())


def parsed(docs: dict[int, dict[str, Any]]) -> dict[int, Dump]:
    return {rank: parse_dump(encode(doc)) for rank, doc in docs.items()}


def session_folder(fault: str, dest: Path) -> Path:
    """A session folder (ranks/<rank>/...) with the fixture's files and the manifest each sidecar would upload."""
    from datetime import UTC, datetime

    from stepscope_contract.manifest import RankManifest
    from stepscope_contract.wire import CaptureState, RankMeta

    for folder in sorted((FIXTURES / fault).iterdir()):
        meta = RankMeta.model_validate_json((folder / "meta.json").read_bytes())
        out = dest / "ranks" / folder.name
        out.mkdir(parents=True)
        for name in ("stacks.txt", "flight_recorder.json.gz"):
            if (folder / name).exists():
                (out / name).write_bytes((folder / name).read_bytes())
        state = CaptureState.HUNG if meta.hung else CaptureState.FAILED
        if meta.dump_reason == "on-demand":
            state = CaptureState.UPLOADED
        manifest = RankManifest(
            capture_id="fixture",
            namespace="ns",
            session=fault,
            rank=int(folder.name),
            state=state,
            meta=meta,
            errors=[meta.error] if meta.error and state is CaptureState.FAILED else [],
            capture_started_at=datetime(2026, 1, 1, tzinfo=UTC),
            capture_finished_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        (out / "manifest.json").write_text(manifest.model_dump_json(by_alias=True))
    return dest
