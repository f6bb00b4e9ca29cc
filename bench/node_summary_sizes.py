"""What honest node summaries weigh, against the caps of their declared shape (stepscope_contract.node_summary_shape).

Summarises each trace as its sidecar would (node_summaries.summarise_trace) and prints the document's bytes, its
JSON values (value_bound, what the analyzer counts before decoding), its recorded steps and its spans, then the
largest honest summary the caps allow for: the largest measured one with every step's spans at MAX_SPANS_PER_STEP and
MAX_SUMMARY_STEPS steps (per-step bytes and values taken from that summary), as a ratio of MAX_NODE_SUMMARY_BYTES
and MAX_NODE_SUMMARY_VALUES. A long capture to measure: tests/analyzer_job/fixtures/make_gloo_traces.py with STEPS
set to 1000 writes two 1,000-step gloo traces.

Usage: python bench/node_summary_sizes.py [TRACE ...]   (default: the recorded fixtures and the HTA sample traces)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from stepscope_analyzer.ranks.node_summaries import summarise_trace
from stepscope_contract.node_summary_shape import (
    MAX_NODE_SUMMARY_BYTES,
    MAX_NODE_SUMMARY_VALUES,
    MAX_SPANS_PER_STEP,
    MAX_SUMMARY_STEPS,
    value_bound,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT = [
    *sorted((REPO / "tests" / "analyzer_job" / "fixtures").glob("*_jobs/*/ranks/0/trace.pt.trace.json.gz")),
    *sorted((REPO.parent / "shared" / "data" / "traces" / "hta").glob("*.json.gz")),
]


def measure(trace: Path) -> dict[str, float]:
    node = summarise_trace(trace.read_bytes(), None, 50, "c-bench")
    data = node.model_dump_json(by_alias=True, exclude_none=True).encode()
    summary = node.summary
    steps = summary.steps.count if summary else 0
    spans = sum(len(s) for s in summary.step_spans) if summary else 0
    span_bytes = len(json.dumps([s.model_dump() for step in summary.step_spans for s in step])) if summary else 0
    return {"bytes": len(data), "values": value_bound(data), "steps": steps, "spans": spans, "span_bytes": span_bytes}


def worst_case(m: dict[str, float]) -> tuple[float, float]:
    """Bytes and values of the summary `m` with MAX_SUMMARY_STEPS steps of MAX_SPANS_PER_STEP spans each."""
    steps, spans = max(m["steps"], 1), max(m["spans"], 1)
    per_span_bytes, per_span_values = m["span_bytes"] / spans, 5.0  # a span object: itself and its four fields
    step_bytes = (m["bytes"] - m["span_bytes"]) / steps  # an upper estimate: the fixed part counted per step too
    step_values = (m["values"] - spans * per_span_values) / steps
    span_total = MAX_SUMMARY_STEPS * MAX_SPANS_PER_STEP
    return (
        MAX_SUMMARY_STEPS * step_bytes + span_total * per_span_bytes,
        MAX_SUMMARY_STEPS * step_values + span_total * per_span_values,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path)
    args = parser.parse_args()
    rows = [(trace, measure(trace)) for trace in args.traces or DEFAULT]
    for trace, m in rows:
        print(f"{m['bytes']:>10,.0f} B {m['values']:>8,.0f} values {m['steps']:>5.0f} steps {m['spans']:>6.0f} spans"
              f"  {trace.name if trace.name != 'trace.pt.trace.json.gz' else trace.parents[2].name}")  # fmt: skip
    trace, largest = max(rows, key=lambda r: r[1]["bytes"])
    print(f"largest: {largest['bytes']:,.0f} B, {largest['values']:,.0f} values ({trace})")
    print(f"  of the caps: bytes {largest['bytes'] / MAX_NODE_SUMMARY_BYTES:.3f}, "
          f"values {largest['values'] / MAX_NODE_SUMMARY_VALUES:.3f}")  # fmt: skip
    size, values = worst_case(max((m for _, m in rows), key=lambda m: m["steps"]))
    print(f"longest, at {MAX_SUMMARY_STEPS} steps x {MAX_SPANS_PER_STEP} spans: ~{size:,.0f} B, ~{values:,.0f} values")
    print(f"  of the caps: bytes {size / MAX_NODE_SUMMARY_BYTES:.3f}, values {values / MAX_NODE_SUMMARY_VALUES:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
