"""A DiagnosisConfig threshold over a grid of values, as the benches' `--fit PARAM=v1,v2,...` names it."""

from __future__ import annotations

import dataclasses
from typing import Any

from stepscope_analyzer.diagnosis.config import DiagnosisConfig


def config_grid(fit: str) -> list[tuple[str, float, DiagnosisConfig]]:
    """'PARAM=v1,v2,...' -> (label 'PARAM=v', v, the defaults with PARAM at v) for each value (`inf` turns a test
    off); a PARAM DiagnosisConfig has not raises TypeError."""
    param, _, grid = fit.partition("=")
    out = []
    for value in (float(v) for v in grid.split(",")):
        fields: dict[str, Any] = {param: value}
        out.append((f"{param}={value:g}", value, dataclasses.replace(DiagnosisConfig(), **fields)))
    return out


__all__ = ["config_grid"]
