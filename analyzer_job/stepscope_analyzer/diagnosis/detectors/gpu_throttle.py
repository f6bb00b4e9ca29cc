"""GPU throttling: a rank slow in its compute whose GPU ran below its peers' clocks, or held down by heat or power
(diagnosis.gpu_throttle reads its NVML samples). The device is the cause, not the work: the finding names the rank,
its clocks and slowdown reasons, and the rank's excess as what cooling or power would win back. Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_analyzer.diagnosis.gpu_throttle import throttle_evidence, throttling
from stepscope_contract.report import Cause, JobFinding


def detect(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    by_rank = {r.rank: r for r in facts.ok}
    findings = []
    for s in facts.found.slow_ranks:
        rank = by_rank.get(s.rank)
        if rank is None or s.cause is not Cause.COMPUTE:
            continue
        found = throttling(rank, [r for r in facts.ok if r is not rank])
        if found is None:
            continue
        where = f"node {s.node}" if s.node else "its node"
        findings.append(
            JobFinding(
                cause=Cause.GPU_THROTTLE,
                summary=f"rank {s.rank}'s GPU is throttled ({found.detail()}): +{s.excess_us / 1000:,.1f} ms of "
                "compute per step against its peers",
                ranks=[s.rank],
                gain_us=s.excess_us,
                remedy=cause_row(Cause.GPU_THROTTLE).next_step.format(r=s.rank, detail=found.detail(), where=where),
                evidence=[throttle_evidence(found)],
            )
        )
    return Found(findings=tuple(findings))
