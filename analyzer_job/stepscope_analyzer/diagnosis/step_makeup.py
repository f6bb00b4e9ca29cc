"""Where the job's step goes, in a few words for the verdict of a job with no slow rank: the step phases that take
the largest shares of the step ('backward 41%, collectives 20%, forward 18%'). Pure.

Each phase's share is the median over the analysed ranks of its share of that rank's mean step (RankReport.phases:
the six phases add up to the mean step), so one odd rank does not move it."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.report import RankReport, StepPhases

WORDS = {
    "data_loading": "data loading",
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer",
    "communication_wait": "blocked in collectives",
    "other": "other host time",
}
"""how each StepPhases key reads in the verdict"""
MIN_SHARE = 0.10
"""phases below this share of the step are left out"""
MOST = 3


def phase_shares(ranks: list[RankReport]) -> dict[str, float]:
    """Phase -> its median share of the mean step over the ranks that have phases."""
    rows = [r.phases for r in ranks if r.phases is not None]
    shares: dict[str, list[float]] = {k: [] for k in StepPhases.model_fields}
    for p in rows:
        total = sum(getattr(p, k) for k in shares)
        if total > 0:
            for k, values in shares.items():
                values.append(getattr(p, k) / total)
    return {k: median(v) for k, v in shares.items() if v}


def step_makeup(ranks: list[RankReport]) -> str:
    """'backward 41%, blocked in collectives 20%, forward 18%': the largest phases (at least MIN_SHARE each, at most
    MOST of them), or '' when the ranks have no phases."""
    shares = sorted(phase_shares(ranks).items(), key=lambda kv: -kv[1])
    parts = [f"{WORDS[k]} {share:.0%}" for k, share in shares[:MOST] if share >= MIN_SHARE]
    return ", ".join(parts)
