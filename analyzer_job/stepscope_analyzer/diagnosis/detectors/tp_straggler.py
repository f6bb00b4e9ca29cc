"""A tensor-parallel group held back by one of its ranks: a compute-slow rank of a TP group (diagnosis.tp_groups).
Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.tp_groups import tp_stragglers


def detect(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    return Found(findings=tuple(tp_stragglers(facts.layout, list(facts.found.slow_ranks), facts.ok)))
