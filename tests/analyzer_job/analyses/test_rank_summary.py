"""summarize_parsed computes a GPU trace's step phases on a thread beside its breakdowns when it may use two CPUs:
the report is the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_analyzer.analyses import summarize_parsed
from stepscope_analyzer.parse import parse_trace

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRACES = [
    FIXTURES / "hta" / "nccl_2rank_rank0.json.gz",  # public HTA test data (see its README)
    *sorted((FIXTURES / "gpu_jobs").glob("*/ranks/1/trace.pt.trace.json.gz"))[:3],  # recorded GPU jobs
    FIXTURES / "gloo_2rank_rank1.pt.trace.json.gz",  # CPU: no phases thread
]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_one_thread_or_two_give_the_same_report(trace: Path) -> None:
    parsed = parse_trace(trace)
    alone = summarize_parsed(parsed, top_n=10**6, threads=1)
    beside = summarize_parsed(parsed, top_n=10**6, threads=2)
    assert alone.step_phases, "a trace with steps, so the phases are compared, not two empty lists"
    assert beside.model_dump() == alone.model_dump()
