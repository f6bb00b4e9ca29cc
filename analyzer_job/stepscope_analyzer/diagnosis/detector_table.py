"""Which detector finds which causes, in the order they run: the second table of the diagnosis, beside the causes
table (diagnosis.causes: each cause's words). Pure.

A detector reads the job's facts (diagnosis.facts) and what the detectors above it found, and returns what it
finds: ranks slow among their peers, findings of the job, and ranks whose extra compute its cause accounts for.
Adding a cause: its enum member (stepscope_contract.report.Cause), its words (a row of diagnosis.causes), its
detector module (diagnosis.detectors) and a row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.detectors import (
    expert_imbalance,
    gpu_throttle,
    pipeline_shape,
    slow_workers,
    standstill,
    tp_straggler,
)
from stepscope_analyzer.diagnosis.facts import Found, JobFacts
from stepscope_contract.report import Cause


@dataclass(frozen=True)
class DetectorRow:
    name: str
    detect: Callable[[JobFacts, DiagnosisConfig], Found]
    causes: frozenset[Cause]
    """the causes its findings and slow ranks carry"""


DETECTORS: tuple[DetectorRow, ...] = (
    DetectorRow("standstill", standstill.detect, frozenset({Cause.HANG, Cause.DESYNC})),
    DetectorRow(
        "slow_workers",
        slow_workers.detect,
        frozenset({Cause.COMPUTE, Cause.HOST, Cause.MEMORY, Cause.COMMUNICATION}),
    ),
    DetectorRow("expert_imbalance", expert_imbalance.detect, frozenset({Cause.EXPERT_IMBALANCE})),
    DetectorRow(
        "pipeline_shape",
        pipeline_shape.detect,
        frozenset({Cause.STAGE_IMBALANCE, Cause.PIPELINE_BUBBLE, Cause.DATA_IMBALANCE}),
    ),
    DetectorRow("tp_straggler", tp_straggler.detect, frozenset({Cause.TP_STRAGGLER})),
    DetectorRow("gpu_throttle", gpu_throttle.detect, frozenset({Cause.GPU_THROTTLE})),
)


def detect_all(facts: JobFacts, settings: DiagnosisConfig) -> Found:
    """Every detector in the table's order, each seeing what the ones above it found."""
    found = Found()
    for row in DETECTORS:
        found = found.merged(row.detect(facts.seeing(found), settings))
    return found
