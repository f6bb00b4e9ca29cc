"""A rank's figures per step, defined once: report.json's `ranks[].per_step`, the report's per-rank table and the
figures the evidence quotes all read them. Pure."""

from __future__ import annotations

from stepscope_contract.report import RankPerStep, RankReport, RankStatus


def rank_per_step(r: RankReport) -> RankPerStep:
    """Means over the rank's recorded steps (the step its median): blocked in collectives (phase
    communication_wait), of which waiting for other ranks, host time (data loading + other), memory copies."""
    n = max(r.steps.count, 1)
    p = r.phases
    return RankPerStep(
        steps=r.steps.count,
        step_median_us=round(r.steps.median_us, 1),
        compute_us=round(p.forward + p.backward + p.optimizer if p is not None else r.compute_time / n, 1),
        blocked_in_collectives_us=round(p.communication_wait if p is not None else r.communication_time / n, 1),
        waiting_us=round(r.collective_wait_time / n, 1),
        host_us=round(r.host_time / n, 1),
        memory_copies_us=round(r.memory_time / n, 1),
    )


def with_per_step(ranks: list[RankReport]) -> list[RankReport]:
    """The analysed ranks with their per-step figures."""
    return [r.model_copy(update={"per_step": rank_per_step(r)}) if r.status is RankStatus.OK else r for r in ranks]
