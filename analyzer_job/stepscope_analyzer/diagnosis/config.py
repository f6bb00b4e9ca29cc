"""Thresholds of the diagnosis, from the session's spec.analysis."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_contract.session import AnalysisSpec


@dataclass(frozen=True)
class DiagnosisConfig:
    outlier_threshold: float = 3.5
    """robust z-score (median/MAD) above which a rank is an outlier"""
    min_slowdown_percent: float = 5.0
    """differences below this share of the median step time are never reported"""
    relative_scale_floor: float = 0.01
    """the spread assumed for a metric is at least this share of its median (balanced ranks have MAD ~ 0)"""
    step_scale_floor: float = 0.01
    """... and at least this share of the median step time (for metrics whose median is ~ 0)"""
    max_evidence: int = 6
    max_bottlenecks: int = 15
    max_collectives: int = 20

    @classmethod
    def from_spec(cls, spec: AnalysisSpec | None) -> DiagnosisConfig:
        if spec is None:
            return cls()
        return cls(outlier_threshold=spec.outlier_threshold, min_slowdown_percent=spec.min_slowdown_percent)
