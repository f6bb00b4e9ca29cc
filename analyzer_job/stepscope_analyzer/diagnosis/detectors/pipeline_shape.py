"""A pipeline job's shape: stage imbalance, the schedule's bubble and data imbalance (diagnosis.pipeline_findings),
measured without the ranks already found slow among their peers. Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.pipeline_findings import pipeline_findings


def detect(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    slow = {s.rank for s in facts.found.slow_ranks}
    step_us = facts.numbers.median_step_us
    return Found(findings=tuple(pipeline_findings(facts.layout, facts.ok, step_us, facts.microbatches, settings,
                                                  slow=slow)))  # fmt: skip
