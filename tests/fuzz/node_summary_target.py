"""One node summary -> the analysis' reading -> the reduce -> report.json and report.html, for the fuzzers.

`one_summary(data)` stores `data` as rank 1's summary.json (in memory) beside an honest rank 0 (the recorded gloo
2-rank job), reads it as the analysis does (node_summaries.read_node_summary: byte and value caps, no NaN/Infinity,
the declared shape, the model) and, where it is usable, reduces both ranks and writes the report. Whatever the bytes,
the reader answers with a summary or a reason, and the report has only finite numbers and stays bounded; anything
else (an exception, a non-finite number, an oversized report) is a finding. `seed()` is rank 1's honest summary.
Used by fuzz_node_summaries.py (atheris, `make fuzz`) and test_fuzz_node_summaries.py (hypothesis, `make test`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from stepscope_analyzer.ranks.node_summaries import read_node_summary, summarise_trace
from stepscope_analyzer.ranks.pipeline import RankOutcome
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_analyzer.report import html_bytes, model_json_bytes
from stepscope_contract.finite import non_finite_paths
from stepscope_contract.report import RankReport
from stepscope_storage import TooLargeError

FIXTURES = Path(__file__).resolve().parents[1] / "analyzer_job" / "fixtures"
KEY = "traces/rank1/summary.json"
MAX_REPORT_BYTES = 8 << 20  # two ranks' report: a summary within its shape cannot make it larger


class MemoryStore:
    """The one object a summary read needs (stepscope_storage's Store read contract: `most` refuses from the size)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        data = self.objects[key]
        if most is not None and len(data) > most:
            if truncate:
                return data[:most]
            raise TooLargeError(key, len(data))
        return data


@functools.cache
def _honest() -> tuple[RankReport, bytes]:
    """Rank 0's summary (the peer) and rank 1's summary document as its node writes it."""
    traces = [(FIXTURES / f"gloo_2rank_rank{r}.pt.trace.json.gz").read_bytes() for r in (0, 1)]
    rank0 = summarise_trace(traces[0], 0, 50, "cap-fuzz").summary
    assert rank0 is not None
    rank1 = summarise_trace(traces[1], 1, 50, "cap-fuzz")
    return rank0, rank1.model_dump_json(by_alias=True, exclude_none=True).encode()


def seed() -> bytes:
    return _honest()[1]


def one_summary(data: bytes) -> None:
    rank0, _ = _honest()
    read = read_node_summary(MemoryStore({KEY: data}), KEY, 1, 50)  # type: ignore[arg-type]
    if read.computed is None or read.computed.summary is None:
        assert read.why, "a summary not used says why"
        return
    outcomes = [RankOutcome(rank0.model_copy(deep=True)), RankOutcome(read.computed.summary)]
    report = reduce_outcomes(outcomes, include_missing=True)
    text = model_json_bytes(report)
    assert len(text) <= MAX_REPORT_BYTES, len(text)
    assert non_finite_paths(json.loads(text)) == []
    html_bytes(report)
