"""Expert imbalance: the ranks of an expert-parallel group that receive the most tokens (diagnosis.expert_balance);
their extra compute is the routing's, so they are no longer slow workers. Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.expert_balance import expert_imbalance
from stepscope_analyzer.diagnosis.facts import Found, JobFacts


def detect(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    findings, _ = expert_imbalance(facts.ok, [])
    return Found(findings=tuple(findings), explains=frozenset(r for f in findings for r in f.ranks))
