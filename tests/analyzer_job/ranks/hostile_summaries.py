"""Session folders whose node summaries are what a hostile (or broken) pod could upload: a recorded 8-rank job
(fixtures/cpu_jobs/cpu-compute-8r-hook-2x, rank 5 slow) with each rank's summary made as its sidecar makes it (bound
to its trace and capture, carrying the manifest the sidecar splices in as it uploads) and session.json, then some
ranks' summaries replaced by one of CASES. Used by test_hostile_node_summaries.py, and runnable to measure one case's
peak memory under any checkout's `stepscope analyze`:

    python tests/analyzer_job/ranks/hostile_summaries.py CASE FOLDER [--unbound]

(`--unbound`: summaries without the binding fields, as older sidecars wrote them.)
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parents[1] / "fixtures"
JOB = FIXTURES / "cpu_jobs" / "cpu-compute-8r-hook-2x"
SLOW_RANK = 5
RANKS = 8
MiB = 1 << 20
Doc = dict[str, Any]


def _fill(doc: Doc, field: str, item: str, size: int) -> bytes:
    """`doc` as JSON with summary.<field> a list of `item` (JSON text) making the document about `size` bytes."""
    head, tail = json.dumps({**doc, "summary": {**doc["summary"], field: "@@"}}).split('"@@"')
    count = max(1, (size - len(head) - len(tail)) // (len(item) + 1))
    return (head + "[" + ",".join([item] * count) + "]" + tail).encode()


def _memory_series(doc: Doc, points: int) -> bytes:
    series = [float(i) for i in range(points)]
    memory = {"device": "cpu", "events": points, "peak_allocated_bytes": 1.0, "t_ms": series,
              "allocated_bytes": series, "reserved_bytes": series}  # fmt: skip
    return json.dumps({**doc, "summary": {**doc["summary"], "memory": memory}}).encode()


def _nan_steps(doc: Doc) -> bytes:
    steps = doc["summary"]["steps"]
    steps = {**steps, "durations_us": [float("nan")] * len(steps["durations_us"]), "median_us": float("nan")}
    return json.dumps({**doc, "summary": {**doc["summary"], "steps": steps}}).encode()  # NaN as JSON's 'NaN'


def _inf_deep(doc: Doc) -> bytes:
    kernels = [{**k, "sum_us": 1e999} for k in doc["summary"].get("top_kernels", [])] or [
        {"name": "k", "kernel_type": "COMPUTATION", "count": 1, "sum_us": 1e999, "mean_us": 1.0, "max_us": 1.0,
         "min_us": 1.0, "stddev": 0.0}]  # fmt: skip
    return json.dumps({**doc, "summary": {**doc["summary"], "top_kernels": kernels}}).encode()  # 'Infinity'


def _as_rank(doc: Doc, rank: int, carried: Doc | None) -> Doc:
    """Another rank's (or capture's) summary relabelled as `rank`'s, with `carried` (the manifest this rank's sidecar
    splices in as it uploads it) or the manifest it came with."""
    out = {**doc, "rank": rank, "summary": {**doc["summary"], "rank": rank}}
    if carried is not None:
        out["manifest"] = carried
    return out


# case -> the ranks it changes, and how: (docs by rank) -> {rank: the document's new bytes}
CASES: dict[str, Callable[[dict[int, Doc]], dict[int, bytes]]] = {
    "63mib": lambda d: {1: _fill(d[1], "step_ops_outside_work", "0.5", 63 * MiB)},
    "empty-phases-4mib": lambda d: {2: _fill(d[2], "step_phases", "{}", 4 * MiB)},
    "floats-16mib": lambda d: {3: _fill(d[3], "step_dilation", "1.25", 16 * MiB)},
    "memory-200k": lambda d: {4: _memory_series(d[4], 200_000)},
    "nan-steps": lambda d: {6: _nan_steps(d[6])},
    "inf": lambda d: {7: _inf_deep(d[7])},
    # a pod uploads rank 2's summary as its own (the sidecar splices its own manifest), and rank 2 rank 0's
    "swapped": lambda d: {
        0: json.dumps(_as_rank(d[2], 0, d[0]["manifest"])).encode(),
        2: json.dumps(_as_rank(d[0], 2, d[2]["manifest"])).encode(),
    },
    # the slow rank uploads a copy of a healthy rank's summary, as stored (with the manifest it carries)
    "copied": lambda d: {SLOW_RANK: json.dumps(_as_rank(d[0], SLOW_RANK, None)).encode()},
    # a summary of another capture (its own manifest of that capture carried along)
    "replayed": lambda d: {
        6: json.dumps(
            {**d[6], "captureId": "cap-earlier", "manifest": {**d[6]["manifest"], "captureId": "cap-earlier"}}
        ).encode()
    },
}
SIZE_CASES = ("63mib", "empty-phases-4mib", "floats-16mib", "memory-200k", "nan-steps", "inf")
BINDING_CASES = ("swapped", "copied", "replayed")


def build(folder: Path, cases: tuple[str, ...], *, bound: bool = True) -> str:
    """The job as a session folder with every rank's node summary and `cases` applied; the capture id."""
    from stepscope_analyzer.ranks.node_summaries import summarise_trace
    from stepscope_contract.analysis_documents import SessionDocument
    from stepscope_contract.manifest import RankManifest
    from stepscope_contract.session import ProfileSessionSpec
    from stepscope_contract.storage import MANIFEST_FILE, RANK_SUMMARY_FILE, SESSION_FILE, TRACE_FILE

    shutil.copytree(JOB / "ranks", folder / "ranks")
    docs: dict[int, Doc] = {}
    capture = ""
    for rank in range(RANKS):
        rank_dir = folder / "ranks" / str(rank)
        manifest = RankManifest.model_validate_json((rank_dir / MANIFEST_FILE).read_text())
        capture = manifest.capture_id
        node = summarise_trace((rank_dir / TRACE_FILE).read_bytes(), rank, 50, capture)
        node.manifest = manifest
        doc = json.loads(node.model_dump_json(by_alias=True, exclude_none=True))
        if not bound:
            for key in ("traceSha256", "traceSize", "captureId"):
                doc.pop(key, None)
        docs[rank] = doc
    changed: dict[int, bytes] = {}
    for case in cases:
        changed.update(CASES[case](docs))
    for rank, doc in docs.items():
        data = changed.get(rank) or json.dumps(doc).encode()
        (folder / "ranks" / str(rank) / RANK_SUMMARY_FILE).write_bytes(data)
    spec = ProfileSessionSpec.model_validate(
        {"targets": {"selector": {"matchLabels": {"app": "train"}}}, "storage": {"uri": "s3://bucket/p"}}
    )
    session = SessionDocument(namespace="default", name="job", uid="u-1", capture_id=capture, spec=spec)
    (folder / SESSION_FILE).write_text(session.to_json())
    return capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--unbound", action="store_true")
    args = parser.parse_args()
    build(args.folder, (args.case,), bound=not args.unbound)


if __name__ == "__main__":
    main()
