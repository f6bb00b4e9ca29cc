"""Memory from a real torch.profiler trace recorded with profile_memory: the allocator's `[memory]` events are kept
on every parse path (the native scanner reads their numbers), the rank's peaks and its memory over
the recorded steps come from them (bounded points, no peak lost), a rank whose peak differs from its peers' gets
evidence, and the report draws the memory section."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from stepscope_analyzer.analyses import summarize_trace
from stepscope_analyzer.analyses.memory import MAX_POINTS
from stepscope_analyzer.diagnosis.memory_evidence import LABEL, memory_evidence
from stepscope_analyzer.parse import native, parse_trace
from stepscope_analyzer.report import html_bytes
from stepscope_analyzer.report.build import build_report
from stepscope_contract.report import Diagnosis, RankReport

pytestmark = pytest.mark.unit


def record(path: Path, tensors_per_step: int) -> Path:
    """A 4-step CPU trace with profile_memory: each step holds `tensors_per_step` 1 MiB tensors at once."""
    torch.set_num_threads(1)
    x = torch.randn(64, 64)

    def handler(p: torch.profiler.profile) -> None:
        p.export_chrome_trace(str(path))

    schedule = torch.profiler.schedule(wait=0, warmup=1, active=4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True,
                                schedule=schedule, on_trace_ready=handler) as prof:  # fmt: skip
        for _ in range(5):
            held = [torch.empty(512, 512) for _ in range(tensors_per_step)]
            _ = x @ x
            del held
            prof.step()
    out = path.with_suffix(".json.gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("memory")
    return [record(folder / f"rank{r}.json", 48 if r == 2 else 4) for r in range(4)]


def test_memory_events_are_kept_on_every_parse_path(traces: list[Path]) -> None:
    doc = json.loads(gzip.decompress(traces[0].read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    assert len(events) > 10
    seen = []
    for on in (True, False):
        with native.enabled(on):
            seen.append(parse_trace(traces[0]).events.memory.tolist())
    assert seen[0] == seen[1] and len(seen[0]) == len(events)
    assert [m[1] for m in seen[0]] == [float(e["args"]["Total Allocated"]) for e in events]
    if native.active():  # the native scanner takes them itself (handing their args over), not the chunk back
        scanned = native.scan(json.dumps(events).encode())
        assert scanned is not None and len(scanned.columns["memory_rows"]) == 32 * len(events)


def test_the_rank_s_memory_over_its_steps(traces: list[Path]) -> None:
    small, large = summarize_trace(traces[0]), summarize_trace(traces[2])
    for r, tensors in ((small, 4), (large, 48)):
        m = r.memory
        assert m is not None and m.device == "cpu" and m.events > 0
        assert m.peak_allocated_bytes >= tensors * 2**20  # every tensor of a step held at once
        assert m.peak_allocated_bytes == max(m.allocated_bytes)  # binned by the most: the peak is drawn
        assert 0 < len(m.t_ms) <= MAX_POINTS and m.t_ms == sorted(m.t_ms)
        assert len(m.step_starts_ms) == r.steps.count and m.step_starts_ms[0] == 0.0
    assert large.memory is not None and small.memory is not None
    assert large.memory.peak_allocated_bytes > 3 * small.memory.peak_allocated_bytes


def test_a_rank_whose_memory_differs_is_evidence_and_the_report_draws_memory(traces: list[Path]) -> None:
    ranks: list[RankReport] = [summarize_trace(t, rank=r) for r, t in enumerate(traces)]
    found = memory_evidence(ranks[2], [r for r in ranks if r.rank != 2])
    assert found is not None and found.metric == LABEL and found.unit == "MiB" and found.value > 3 * found.baseline
    assert memory_evidence(ranks[0], [r for r in ranks if r.rank not in (0, 2)]) is None  # the same as its peers
    page = html_bytes(build_report(ranks, Diagnosis(verdict="v"))).decode()
    assert 'id="memory"' in page and 'id="memory-chart"' in page
    chart = page.split('id="memory-chart"', 1)[1].split("</svg>", 1)[0]
    assert chart.count("<polyline") == 4 and "rank 2 cpu memory allocated" in chart
