"""Hang and desync: the ranks that hold a standstill up, as the stacks and Flight Recorder dumps name them
(diagnosis.hangs reads them into the job's facts). Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.facts import Found, JobFacts


def detect(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    return Found(slow_ranks=tuple(facts.hang.slow_ranks))
