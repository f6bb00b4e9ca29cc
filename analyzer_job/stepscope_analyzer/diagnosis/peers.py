"""Slow ranks among their peers: in a job with pipeline stages, a rank is compared only with the ranks that do the
same work (its stage in the other replicas and tensor-parallel positions, diagnosis.layout). Pure.

Stages legitimately differ (the last computes the loss, stages hold different layers) and wait for one another in
the schedule: compared with every rank, a heavy stage reads as slow ranks, and the fast replicas' ranks that idle
while a slow replica finishes read as host work. Among peers, the slow-rank test (diagnosis.slow_ranks) is the
data-parallel one: the same costs, noise and consistency tests, the same check that the peers wait for the rank
(for a share of its excess: PEER_WAIT_SHARE).
Stages are compared with each other as stages (diagnosis.pipeline_findings). A job without stages is compared as
one group of peers.

Waiting is not work: a rank whose peer is still computing may wait outside any collective (its host thread blocked
in a synchronisation while its device idles), and that time lands in its host phases. Before the comparison, in
each recorded step, the part of a rank's host time beyond its peers' least that is no longer than the most a peer
computed beyond it is taken for waiting (moved to communication_wait): a fast replica idling while the slow one
finishes waits for it, and is not a host straggler. A rank whose host time is work (more of it than its peers at
equal compute) keeps it.
"""

from __future__ import annotations

import dataclasses

from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.job_view import latenesses, median_step_us
from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.slow_ranks import Replayed, find_slow_ranks
from stepscope_contract.report import Evidence, RankReport, SlowRank, StepPhases


def _peer_evidence(layout: Layout, rank: int, peers: list[int]) -> Evidence:
    stage = layout.stage.get(rank, 0)
    others = ", ".join(str(p) for p in peers if p != rank)
    return Evidence(
        metric="peers",
        value=float(len(peers) - 1),
        baseline=float(stage),
        unit="ranks",
        detail=f"compared with its peers, the ranks of pipeline stage {stage} in the other replicas (rank {others})",
    )


PEER_WAIT_SHARE = 0.35
"""among peers, the other replicas must wait for a slow rank at least this share of its wall-clock excess
(DiagnosisConfig.wait_share elsewhere): they wait for it only at the replicas' join, and on shared CPU cores its
wall-clock excess holds stretches of waiting for a CPU as well; in a pp2 x dp2 job recorded at a load of 20 on 2
cores, the 2x rank's peer waited 23 ms per step for its 55 ms of wall-clock excess (25 ms without the stretches)"""


def _compute(p: StepPhases) -> float:
    return p.forward + p.backward + p.optimizer


def waiting_not_work(peers: list[RankReport]) -> list[RankReport]:
    """The peers with each step's host time that is waiting for a peer moved to communication_wait (module
    docstring); unchanged where their recorded steps do not line up."""
    counts = {len(r.step_phases) for r in peers}
    if len(peers) < 2 or len(counts) != 1 or 0 in counts:
        return peers
    out = []
    for r in peers:
        steps = []
        for t, p in enumerate(r.step_phases):
            least_host = min(x.step_phases[t].other for x in peers)
            most_compute = max(_compute(x.step_phases[t]) for x in peers)
            waiting = max(0.0, min(p.other - least_host, most_compute - _compute(p)))
            steps.append(p.model_copy(update={"other": p.other - waiting,
                                              "communication_wait": p.communication_wait + waiting}))  # fmt: skip
        out.append(r.model_copy(update={"step_phases": steps}))
    return out


def replica_lateness(cohorts: list[list[RankReport]], layout: Layout) -> dict[int, float]:
    """Each rank's replica's lateness: the most any of its ranks keeps its peers (the other replicas' ranks of its
    stage) waiting per step. A slow rank of stage 0 delays its replica's later stages through the schedule, and the
    other replicas wait for the replica at the join of whichever stage it reaches last: the wait shows there."""
    own: dict[int, float] = {}
    for cohort in cohorts:
        own.update(latenesses(cohort))
    most: dict[int, float] = {}
    for rank, late in own.items():
        replica = layout.replica.get(rank, 0)
        most[replica] = max(most.get(replica, late), late)
    return {rank: most[layout.replica.get(rank, 0)] for rank in own}


def find_slow_peers(
    ranks: list[RankReport],
    cfg: DiagnosisConfig,
    layout: Layout | None,
    under_floor: dict[int, str] | None = None,
    replayed: Replayed | None = None,
) -> list[SlowRank]:
    """Slow ranks, each found against its peers only (every rank against every other without stages); the other
    replicas' waiting for a rank is its replica's (replica_lateness). `under_floor`, `replayed`: as
    slow_ranks.find_slow_ranks (the replay's test asks every rank of a job without stages)."""
    if layout is None or layout.stages < 2:
        return find_slow_ranks(ranks, cfg, under_floor=under_floor, replayed=replayed)
    by_rank = {r.rank: r for r in ranks}
    peer_cfg = dataclasses.replace(cfg, wait_share=min(cfg.wait_share, PEER_WAIT_SHARE))
    cohorts = [waiting_not_work([by_rank[r] for r in c]) for c in layout.peers(list(by_rank)) if len(c) >= 2]
    late = replica_lateness(cohorts, layout)
    step = median_step_us(ranks)  # the user's floor is a share of the job's step, whichever peers are compared
    out: list[SlowRank] = []
    for cohort_ranks in cohorts:  # a stage without replicas has no peers: only the stage comparison speaks of it
        cohort = [r.rank for r in cohort_ranks]
        for s in find_slow_ranks(cohort_ranks, peer_cfg, late, under_floor, step_us=step):
            out.append(s.model_copy(update={"evidence": [*s.evidence, _peer_evidence(layout, s.rank, cohort)]}))
    out.sort(key=lambda s: (-s.excess_us, s.rank))
    return out
