"""The verdict of a job with a parallel layout: the largest finding of the job's shape when no rank is slow among
its peers (the stage, the schedule or the data), and the layout it was judged in. Pure."""

from __future__ import annotations

import dataclasses

from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers
from stepscope_analyzer.diagnosis.verdict import Coverage, verdict_line
from stepscope_contract.report import Hang, JobFinding, ParallelLayout, SlowNode, SlowRank


def with_finding_numbers(
    numbers: StepNumbers, findings: list[JobFinding], slow: list[SlowRank], hangs: list[Hang]
) -> StepNumbers:
    """Without slow ranks or hangs, the expected step and the speedup are the largest finding's remedy's."""
    if slow or hangs or not findings or numbers.median_step_us <= 0 or findings[0].gain_us <= 0:
        return numbers
    expected = max(numbers.median_step_us - findings[0].gain_us, 0.1 * numbers.median_step_us)
    return dataclasses.replace(numbers, expected_step_us=expected, estimated_speedup=numbers.median_step_us / expected)


def finding_verdict(
    findings: list[JobFinding],
    slow: list[SlowRank],
    hangs: list[Hang],
    numbers: StepNumbers,
    coverage: Coverage,
    *,
    layout: ParallelLayout | None,
    nodes: list[SlowNode],
) -> str | None:
    """The verdict line of a job with a layout, or of a job without one whose top finding is its own (an expert
    imbalance) and no rank slow, or None to leave it to the data-parallel verdict."""
    if hangs or (layout is None and (slow or not findings)):
        return None
    shape = f"; {layout.summary}" if layout is not None else ""
    if slow:
        line = verdict_line(slow, hangs, nodes, numbers, coverage).rstrip(".")
        return f"{line}{shape}, each rank compared with its peers."
    if not findings:
        line = verdict_line(slow, hangs, nodes, numbers, coverage).rstrip(".")
        return f"{line}{shape}."
    top = findings[0]
    gain = ""
    if numbers.expected_step_us is not None and numbers.estimated_speedup is not None:
        gain = (
            f"; steps take {numbers.median_step_us / 1000:,.1f} ms, ~{numbers.expected_step_us / 1000:,.1f} ms "
            f"with the remedy (~{numbers.estimated_speedup:.2f}x faster)"
        )
    more = "; also: " + "; ".join(f.summary for f in findings[1:]) if len(findings) > 1 else ""
    return (
        f"{top.summary[0].upper()}{top.summary[1:]} (cause {top.cause.value}: {cause_row(top.cause).verdict})"
        f"{gain}{more}{shape}{coverage.tail()}."
    )
