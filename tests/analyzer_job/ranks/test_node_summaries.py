"""Ranks summarised where they were recorded give the same report as a central analysis: for one job of each kind in the
recorded corpus (each fixture set's faults, schedules and layouts: balanced, stragglers, host stalls, pipelines,
tensor parallelism, GPU jobs, hangs; KINDS), each rank's trace is summarised as its sidecar does
(node_summaries.summarise_trace, beside the trace as summary.json), then the folder is analysed centrally with those
summaries and again parsing every trace; report.json is the same but for the analysis' own time. A summary that is
stale (another analyzer version or top-N), unreadable, another rank's, or refused (the node could not parse the
trace) is not used: the trace is parsed and the rank gets its usual result or error (and, for a summary refused for
what it holds, an error that says why). What the summaries hold beyond their free share draws on one budget per
analysis. The command the sidecar runs writes the document, bound to its trace, or a refusal where it would be beyond
its declared shape."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope_analyzer import limits, tool_version
from stepscope_analyzer.ranks import node_summaries
from stepscope_analyzer.ranks.node_summaries import summarise_trace
from stepscope_analyzer.ranks.pipeline import discover, summarize_all
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_analyzer.report import model_json_bytes
from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.manifest import ArtifactFile, RankManifest
from stepscope_contract.report import RankStatus
from stepscope_contract.storage import MANIFEST_FILE, RANK_SUMMARY_FILE, TRACE_FILE, TRACE_SUFFIX, trace_name
from stepscope_contract.wire import CaptureState
from stepscope_testing.handwritten_jobs import HandJob

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _kind(truth: Path) -> tuple[object, ...]:
    """What a recorded job's traces hold, as far as summarising them goes: its fixture set, its fault, and its
    schedule, tensor parallelism, stages and shape findings; jobs that differ only in size, load or seed share one.
    A job recorded before its generator had `schedule` and `tp` ran their defaults (HandJob's)."""
    doc = json.loads(truth.read_text())
    job, layout = doc.get("job") or {}, doc.get("layout") or {}
    schedule, tp = job.get("schedule") or HandJob.schedule, job.get("tp") or HandJob.tp
    shape = (schedule, tp, layout.get("stages"), bool(doc.get("findings")))
    return (truth.parent.parent.name, doc.get("kind"), *shape)


KINDS: dict[tuple[object, ...], Path] = {}
"""one job of each kind (the first by name): the other jobs of a kind take the same paths through the summaries"""
for _truth in sorted(FIXTURES.glob("*_jobs/*/truth.json")):
    KINDS.setdefault(_kind(_truth), _truth)
SCENARIOS = sorted(str(t.parent.relative_to(FIXTURES)) for t in KINDS.values())
ONE_PROCESS = {min(s for s in SCENARIOS if s.startswith(f"{kind}/")) for kind in {s.split("/")[0] for s in SCENARIOS}}
"""the first scenario of each fixture set, analysed once more in one process (no worker pool): the pool and the
command's own process give the same report"""


def _as_session_folder(source: Path, folder: Path) -> Path:
    """The scenario as a session folder: copied as it is, or (a plain folder of traces) each trace moved to
    traces/rank<R>.pt.trace.json.gz after the rank it says, where a sidecar would have put it, with the manifest a
    sidecar writes (recording the trace's size and SHA-256)."""
    if (source / "ranks").is_dir():
        shutil.copytree(source, folder)
        return folder
    for trace in sorted(source.glob("*.pt.trace.json.gz")):
        rank = summarise_trace(trace.read_bytes(), None, 1).rank
        assert rank is not None, trace
        (folder / "traces" / f"rank{rank}").mkdir(parents=True, exist_ok=True)
        shutil.copy(trace, folder / "traces" / trace_name(rank))
        manifest = manifest_of(trace.read_bytes(), rank, "cap-test")
        (folder / "traces" / f"rank{rank}" / MANIFEST_FILE).write_text(manifest.model_dump_json(by_alias=True))
    return folder


def manifest_of(trace: bytes, rank: int, capture_id: str) -> RankManifest:
    """A rank's manifest as its sidecar writes it: the trace's size and SHA-256 recorded."""
    recorded = ArtifactFile(name=TRACE_FILE, size=len(trace), sha256=hashlib.sha256(trace).hexdigest())
    return RankManifest(capture_id=capture_id, namespace="default", session="job", rank=rank,
                        state=CaptureState.UPLOADED, files=[recorded])  # fmt: skip


def _node_summary(trace: Path, rank: int, top_n: int, rank_dir: Path, carry_manifest: bool) -> NodeSummary:
    """The rank's summary as its sidecar uploads it: bound to its trace and capture, carrying the manifest that goes
    up after it."""
    path = rank_dir / MANIFEST_FILE
    manifest = RankManifest.model_validate_json(path.read_text()) if path.is_file() else None
    node = summarise_trace(trace.read_bytes(), rank, top_n, manifest.capture_id if manifest else "cap-test")
    if carry_manifest and manifest is not None:
        node.manifest = manifest
    return node


def _summarise_on_nodes(folder: Path, top_n: int = 50, *, carry_manifest: bool = True) -> int:
    """Each rank's summary beside its trace, as its sidecar leaves it; how many were written."""
    written = 0
    for trace in sorted(folder.glob(f"ranks/*/{TRACE_FILE}")):  # the first layout: ranks/<R>/
        node = _node_summary(trace, int(trace.parent.name), top_n, trace.parent, carry_manifest)
        (trace.parent / RANK_SUMMARY_FILE).write_text(node.model_dump_json(by_alias=True, exclude_none=True))
        written += 1
    for trace in sorted(folder.glob(f"traces/rank*{TRACE_SUFFIX}")):  # traces/rank<R>.pt.trace.json.gz
        rank = int(trace.name.removeprefix("rank").removesuffix(TRACE_SUFFIX))
        rank_dir = trace.parent / f"rank{rank}"
        rank_dir.mkdir(exist_ok=True)
        node = _node_summary(trace, rank, top_n, rank_dir, carry_manifest)
        (rank_dir / RANK_SUMMARY_FILE).write_text(node.model_dump_json(by_alias=True))
        written += 1
    return written


class CountingStore(LocalStore):
    """A local store that records the keys it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        self.reads.append(key)
        return super().read(key, most, truncate)


def _report_json(
    folder: Path, workers: int, progress: list[str] | None = None, store: LocalStore | None = None
) -> dict[str, object]:
    store = store or LocalStore()
    layout = discover(store, location_of(str(folder)))
    sink: list[str] = [] if progress is None else progress
    outcomes = summarize_all(store, layout, workers=workers, progress=sink.append)
    report = reduce_outcomes(outcomes, include_missing=layout.session, notes=layout.notes)
    data = json.loads(model_json_bytes(report))
    for volatile in ("generated_at", "analysis_seconds"):
        data.pop(volatile, None)
    return data


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_node_summaries_give_the_central_report(scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _as_session_folder(FIXTURES / scenario, tmp_path / "job")
    monkeypatch.setenv(node_summaries.ENV_NODE_SUMMARIES, "off")
    central = _report_json(folder, workers=2)  # before any summary exists, and with them switched off after
    traces = len([*folder.glob(f"ranks/*/{TRACE_FILE}"), *folder.glob(f"traces/*{TRACE_SUFFIX}")])
    assert _summarise_on_nodes(folder) == traces  # every trace (a hung job's ranks may have none)
    if scenario in ONE_PROCESS:  # summaries switched off: every trace parsed again
        assert _report_json(folder, workers=1) == central
    monkeypatch.delenv(node_summaries.ENV_NODE_SUMMARIES)
    progress: list[str] = []
    from_nodes = _report_json(folder, workers=2, progress=progress)
    analysed = sum(1 for r in central["ranks"] if r["status"] == RankStatus.OK.value)  # type: ignore[index,union-attr]
    if analysed:  # no trace was parsed again
        assert any(line.startswith(f"{analysed} of ") and "summarised on their nodes" in line for line in progress)
    assert not [line for line in progress if "steps in" in line or "steps at" in line], progress
    assert from_nodes == central


def refusals(report: dict[str, object]) -> list[str]:
    """The node summaries' refusals `report` lists as its ranks' errors, taken out of it (the rest of the report is
    then the central one)."""
    errors: list[dict[str, object]] = report["errors"]  # type: ignore[assignment]
    refused = [e for e in errors if str(e["message"]).startswith("node summary refused")]
    report["errors"] = [e for e in errors if e not in refused]
    return [f"rank {e['rank']}: {e['message']}" for e in refused]


def _two_ranks(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    shutil.copytree(FIXTURES / "cpu_jobs" / "cpu-compute-4r-hook-2x", folder)
    for extra in ("2", "3"):
        shutil.rmtree(folder / "ranks" / extra)
    return folder


def test_summaries_that_do_not_stand_for_this_analysis_are_not_used(tmp_path: Path) -> None:
    folder = _two_ranks(tmp_path)
    central = _report_json(folder, workers=1)
    _summarise_on_nodes(folder)
    path0, path1 = (folder / "ranks" / r / RANK_SUMMARY_FILE for r in ("0", "1"))
    stale = NodeSummary.model_validate_json(path0.read_text()).model_copy(update={"analyzer_version": "0.0.0-old"})
    path0.write_text(stale.model_dump_json(by_alias=True))
    wrong = NodeSummary.model_validate_json(path1.read_text())
    assert wrong.summary is not None
    rank0 = wrong.model_copy(update={"rank": 0, "summary": wrong.summary.model_copy(update={"rank": 0})})
    path1.write_text(rank0.model_dump_json(by_alias=True))  # rank 0's summary in rank 1's folder
    progress: list[str] = []
    report = _report_json(folder, workers=1, progress=progress)
    assert refusals(report) == ["rank 1: node summary refused: it is rank 0's"]  # the stale one is only not used
    assert report == central
    assert any(f"made by analyzer 0.0.0-old, this is {tool_version()}" in line for line in progress), progress
    assert any("it is rank 0's" in line for line in progress), progress
    path0.write_text("{not json")
    path1.write_text(NodeSummary(analyzer_version=tool_version(), top_n=10, rank=1, summary=wrong.summary)
                     .model_dump_json(by_alias=True))  # fmt: skip
    progress.clear()
    report = _report_json(folder, workers=1, progress=progress)
    assert [r[:30] for r in refusals(report)] == ["rank 0: node summary refused: "] and report == central
    assert any("node summary refused: not JSON" in line for line in progress), progress
    assert any("made with top-n 10, this analysis keeps 50" in line for line in progress), progress


def test_a_summary_whose_calls_do_not_line_up_is_refused_and_the_trace_parsed(tmp_path: Path) -> None:
    """A node summary whose communication calls are not parallel lists (a broken or hostile sidecar) is not read
    half: the trace is parsed here, and the report is the central one."""
    folder = _two_ranks(tmp_path)
    central = _report_json(folder, workers=1)
    _summarise_on_nodes(folder)
    path = folder / "ranks" / "1" / RANK_SUMMARY_FILE
    wire = json.loads(path.read_text())
    calls = wire["summary"]["comm_calls"]
    assert calls and len(calls["dur_us"]) > 1
    calls["peer"] = calls["peer"][:-1]
    path.write_text(json.dumps(wire))
    progress: list[str] = []
    report = _report_json(folder, workers=1, progress=progress)
    assert len(refusals(report)) == 1 and report == central
    assert any("node summary refused" in line and "one entry per call" in line for line in progress), progress


def test_a_trace_the_node_refused_gets_its_usual_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _two_ranks(tmp_path)
    monkeypatch.setenv(node_summaries.ENV_NODE_SUMMARIES, "off")
    (folder / "ranks" / "1" / TRACE_FILE).write_bytes(b"\x1f\x8b not really gzip")
    central = _report_json(folder, workers=1)
    _summarise_on_nodes(folder)
    refused = NodeSummary.model_validate_json((folder / "ranks" / "1" / RANK_SUMMARY_FILE).read_text())
    assert refused.summary is None and refused.error
    monkeypatch.delenv(node_summaries.ENV_NODE_SUMMARIES)
    progress: list[str] = []
    again = _report_json(folder, workers=1, progress=progress)
    assert again == central and again["ranks"][1]["status"] == "error"  # type: ignore[index]
    assert any("the node could not summarise the trace" in line for line in progress), progress


def test_the_sidecars_command_writes_the_summary(tmp_path: Path) -> None:
    trace = FIXTURES / "gloo_2rank_rank1.pt.trace.json.gz"
    out = tmp_path / RANK_SUMMARY_FILE
    result = subprocess.run(
        [sys.executable, "-m", "stepscope_analyzer.ranks.node_summaries", "--rank", "1", "--top-n", "50", str(trace),
         str(out)], capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    node = NodeSummary.model_validate_json(out.read_text())
    assert node.analyzer_version == tool_version() and node.rank == 1 and node.summary is not None
    assert node.summary == summarise_trace(trace.read_bytes(), 1, 50).summary
    assert "rank 1: summarised in" in result.stderr and "peak" in result.stderr


def test_one_read_per_rank_where_the_summary_carries_the_manifest(tmp_path: Path) -> None:
    folder = _two_ranks(tmp_path)
    central = _report_json(folder, workers=1)
    _summarise_on_nodes(folder, carry_manifest=False)  # summaries from before they carried it: both files read
    store = CountingStore()
    assert _report_json(folder, workers=1, store=store) == central
    manifests = [str(folder / "ranks" / r / MANIFEST_FILE) for r in ("0", "1")]
    summaries = [str(folder / "ranks" / r / RANK_SUMMARY_FILE) for r in ("0", "1")]
    assert sorted(store.reads) == sorted(manifests + summaries)
    _summarise_on_nodes(folder)
    store = CountingStore()
    assert _report_json(folder, workers=1, store=store) == central
    assert sorted(store.reads) == sorted(summaries)
    assert central["ranks"][0]["node"] == "node-0"  # type: ignore[index]  # what the manifest says is there
    Path(manifests[1]).unlink()  # its upload never finished: the manifest it carries is not taken either
    without = _report_json(folder, workers=1)
    assert without["ranks"][1]["node"] is None and without["ranks"][0]["node"] == "node-0"  # type: ignore[index]


def test_what_summaries_hold_beyond_their_free_share_draws_on_one_budget(tmp_path: Path) -> None:
    """Each summary's bytes beyond max_node_summary_free_bytes draw on max_node_summary_total_bytes: a summary that
    does not fit what is left is refused (its trace parsed), naming the limit."""
    folder = _two_ranks(tmp_path)
    central = _report_json(folder, workers=1)
    _summarise_on_nodes(folder)
    sizes = [(folder / "ranks" / r / RANK_SUMMARY_FILE).stat().st_size for r in ("0", "1")]
    with limits.override(max_node_summary_free_bytes=1024, max_node_summary_total_bytes=max(sizes) - 1024):
        report = _report_json(folder, workers=1)
    refused = refusals(report)
    assert len(refused) == 1 and "beyond the limit max_node_summary_total_bytes" in refused[0], refused
    assert report == central


def test_the_writer_refuses_a_summary_beyond_its_shape() -> None:
    node = summarise_trace((FIXTURES / "gloo_2rank_rank1.pt.trace.json.gz").read_bytes(), 1, 50, "cap-1")
    data, why = node_summaries.writable(node)
    assert why is None and NodeSummary.model_validate_json(data) == node
    assert node.summary is not None
    steps = node.summary.steps.model_copy(update={"durations_us": [1.0] * 2000, "numbers": []})
    data, why = node_summaries.writable(
        node.model_copy(update={"summary": node.summary.model_copy(update={"steps": steps})})
    )
    written = NodeSummary.model_validate_json(data)
    assert why is not None and "(MAX_SUMMARY_STEPS)" in why
    assert written.summary is None and str(written.error).startswith("the summary is beyond its shape: /summary/steps")
    assert (written.trace_sha256, written.capture_id) == (node.trace_sha256, "cap-1")  # still bound to its trace


def test_one_reason_for_many_ranks_is_told_once(tmp_path: Path) -> None:
    """Every rank's summary made with another top-n: the reason they are not used is printed once, with the ranks."""
    folder = tmp_path / "job"
    shutil.copytree(FIXTURES / "cpu_jobs" / "cpu-compute-4r-hook-2x", folder)
    _summarise_on_nodes(folder, top_n=10)
    progress: list[str] = []
    _report_json(folder, workers=1, progress=progress)
    told = [line for line in progress if "made with top-n 10, this analysis keeps 50" in line]
    assert len(told) == 1 and "and 1 more" in told[0], progress
