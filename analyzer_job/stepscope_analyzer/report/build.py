"""Assemble the contract Report from per-rank summaries, errors and the diagnosis. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

from stepscope_analyzer import tool_version
from stepscope_analyzer.report.per_step import with_per_step
from stepscope_analyzer.report.timeline import job_timeline
from stepscope_contract.report import Diagnosis, RankError, RankReport, Report, SessionInfo


def _as_reported(ranks: list[RankReport]) -> list[RankReport]:
    """The summaries as report.json holds them: without their per-step spans (the report keeps the timeline's step
    only) and their communication calls (diagnosis.waits holds what matching them found)."""
    return [
        r.model_copy(update={"step_spans": [], "comm_calls": None}) if r.step_spans or r.comm_calls else r
        for r in ranks
    ]


def build_report(
    ranks: list[RankReport],
    diagnosis: Diagnosis,
    *,
    errors: list[RankError] | None = None,
    session: SessionInfo | None = None,
    world_size: int | None = None,
    analysis_seconds: float = 0.0,
    generated_at: datetime | None = None,
    notes: list[str] | None = None,
    shown: list[RankReport] | None = None,
) -> Report:
    """The report; `shown`: the ranks it holds in full (default: all of `ranks`, which the timeline draws from)."""
    ordered = sorted(ranks, key=lambda r: r.rank)
    if world_size is None:
        sizes = [r.world_size for r in ordered if r.world_size]
        world_size = max(sizes) if sizes else (len(ordered) or None)
    timeline = job_timeline(ordered, {s.rank for s in diagnosis.slow_ranks})
    return Report(
        timeline=timeline,
        tool_version=tool_version(),
        generated_at=generated_at or datetime.now(UTC),
        session=session or SessionInfo(),
        world_size=world_size,
        analysis_seconds=round(analysis_seconds, 3),
        ranks=_as_reported(with_per_step(ordered if shown is None else sorted(shown, key=lambda r: r.rank))),
        diagnosis=diagnosis,
        errors=list(errors or []),
        notes=list(notes or []),
    )
