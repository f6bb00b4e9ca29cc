"""What-if replay of a pipeline job's steps: the step time if one thing ran differently. Pure.

Each recorded step is replayed through its dependencies: in every replica each stage runs its microbatches'
forwards and backwards in the 1F1B order (min(S - s - 1, M) warm-up forwards, then one forward and one backward
in turn, then the cool-down backwards), a forward after the previous stage's forward of the same microbatch (a P2P
edge), a backward after the next stage's backward (the last stage's after its own forward); then each rank runs
its host work of the step (data loading and other host time, less what its peers' compute shows to be waiting for
them: diagnosis.peers.waiting_not_work), and the replicas of each stage join in their gradients' all_reduce; the
step ends when the last stage group has joined. A rank's microbatches take its recorded forward and backward time
of that step, shared evenly over the microbatches (the traces time whole steps). The replayed step is a model:
what-ifs are read as differences, the recorded step less (replayed now - replayed with the change), averaged over
the steps.

What-ifs: a slow rank running like its peers (each step, the median of its stage's other replicas' time in the
cost it is slow in: forward and backward, or host work for a host straggler),
every slow rank like its peers together (the job's gain, diagnosis.replayed_gain),
balanced stages (every stage of a replica doing the mean of that replica's stages that step), and every step's
work at its median (each rank's time each step its median over the steps: inputs of one size). A stage
imbalance's gain is its what-if's. A data imbalance's is not: its cost is mostly between the microbatches of one
step, which a replay of whole-step times shares out evenly (diagnosis.pipeline_findings measures it on the steps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stepscope_analyzer.diagnosis.dp_replay import ALL_LIKE_PEERS, replayed_what_if
from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.peers import waiting_not_work
from stepscope_contract.report import Cause, JobFinding, RankReport, StepPhases, WhatIf

Work = dict[int, tuple[float, float, float]]
"""rank -> (forward µs, backward µs, host µs) of one step"""


@dataclass(frozen=True)
class StepWork:
    stages: int
    replicas: int
    microbatches: int
    cells: dict[tuple[int, int], int]
    """(stage, replica) -> rank"""
    steps: list[Work]


def _order(stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    warm = min(stages - stage - 1, micro)
    order = [("F", m) for m in range(warm)]
    f = warm
    for b in range(micro):
        if f < micro:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
    return order


def _replica_ends(stages: int, micro: int, work: list[tuple[float, float]]) -> list[float]:
    """Each stage's end of one replica's 1F1B step; work[s] = (forward, backward) per microbatch of stage s."""
    orders = [_order(s, stages, micro) for s in range(stages)]
    done: dict[tuple[int, str, int], float] = {}
    pos, free = [0] * stages, [0.0] * stages
    progress = True
    while progress:
        progress = False
        for s in range(stages):
            while pos[s] < len(orders[s]):
                kind, m = orders[s][pos[s]]
                dep = (s - 1, "F", m) if kind == "F" else ((s + 1, "B", m) if s < stages - 1 else (s, "F", m))
                if not (kind == "F" and s == 0) and dep not in done:
                    break
                ready = done.get(dep, 0.0) if not (kind == "F" and s == 0) else 0.0
                free[s] = done[(s, kind, m)] = max(free[s], ready) + work[s][0 if kind == "F" else 1]
                pos[s] += 1
                progress = True
    return free


NO_WORK = (0.0, 0.0, 0.0)


def tuple_median(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Each of the three costs' median over `rows`."""
    f, b, h = (float(np.median([row[i] for row in rows])) for i in range(3))
    return f, b, h


def replay_step(job: StepWork, work: Work) -> float:
    """The replayed duration of one step with `work` (see the module docstring)."""
    m = max(job.microbatches, 1)
    joins = [0.0] * job.stages
    for d in range(job.replicas):
        per: list[tuple[float, float]] = []
        host: list[float] = []
        for s in range(job.stages):
            rank = job.cells.get((s, d))
            f, b, h = work.get(rank, NO_WORK) if rank is not None else NO_WORK
            per.append((f / m, b / m))
            host.append(h)
        for s, end in enumerate(_replica_ends(job.stages, m, per)):
            joins[s] = max(joins[s], end + host[s])
    return max(joins)


def _host(p: StepPhases) -> float:
    return p.data_loading + p.other


def step_work(layout: Layout, ranks: list[RankReport], microbatches: int | None) -> StepWork | None:
    """The recorded forward, backward and host time of every rank in every step, where every rank has the same
    steps (host time less the waiting for a peer that it holds: diagnosis.peers.waiting_not_work, per stage)."""
    counts = {len(r.step_phases) for r in ranks}
    if len(counts) != 1 or 0 in counts or layout.stages < 2:
        return None
    cells = {(layout.stage.get(r.rank, 0), layout.replica.get(r.rank, 0)): r.rank for r in ranks}
    by_rank = {r.rank: r for r in ranks}
    worked = [r for cohort in layout.peers(list(by_rank)) for r in waiting_not_work([by_rank[x] for x in cohort])]
    steps = [
        {r.rank: (r.step_phases[t].forward, r.step_phases[t].backward, _host(r.step_phases[t])) for r in worked}
        for t in range(counts.pop())
    ]
    return StepWork(layout.stages, layout.replicas, microbatches or 1, cells, steps)


def savings(job: StepWork, change: Callable[[int, Work], Work]) -> list[float]:
    """Each recorded step's replayed saving with `change` (step index, recorded work -> changed work)."""
    return [replay_step(job, w) - replay_step(job, change(t, w)) for t, w in enumerate(job.steps)]


def what_if(job: StepWork, change: Callable[[int, Work], Work], step_us: float) -> float:
    """The step time with `change`: the recorded step less the mean replayed difference."""
    return max(step_us - float(np.mean(savings(job, change))), 0.0)


def like_peers(
    job: StepWork, rank: int, exclude: list[int] | None = None, host: bool = False
) -> Callable[[int, Work], Work]:
    """`rank` like its stage's other replicas in its forward and backward, or with `host` in its host work."""
    stage = next((s for (s, _), r in job.cells.items() if r == rank), None)
    peers = [r for (s, _), r in job.cells.items() if s == stage and r != rank]
    peers = [r for r in peers if r not in (exclude or [])] or peers

    def change(_: int, w: Work) -> Work:
        if not peers:
            return w
        f, b, h = tuple_median([w[p] for p in peers])
        mine = w[rank]
        return {**w, rank: (mine[0], mine[1], h) if host else (f, b, mine[2])}

    return change


def all_like_peers(job: StepWork, ranks: list[int], host: frozenset[int] = frozenset()) -> Callable[[int, Work], Work]:
    """Every rank of `ranks` like its stage's replicas that are not among them (all of them where none is left), in
    host work for the ranks of `host`."""
    changes = [(r, like_peers(job, r, exclude=ranks, host=r in host)) for r in ranks]

    def change(t: int, w: Work) -> Work:
        return {**w, **{r: one(t, w)[r] for r, one in changes}}

    return change


def pipeline_gain_of(job: StepWork, host: frozenset[int] = frozenset()) -> Callable[[list[int]], float]:
    """The mean replayed saving per step of any set of slow ranks running like their peers (diagnosis.gain_shares);
    `host`: the slow ranks whose host work is what stands out."""
    return lambda ranks: float(np.mean(savings(job, all_like_peers(job, ranks, host))))


def balanced_stages(job: StepWork) -> Callable[[int, Work], Work]:
    def change(_: int, w: Work) -> Work:
        out = dict(w)
        for d in range(job.replicas):
            members = [r for (_, rep), r in job.cells.items() if rep == d]
            f = float(np.mean([w[r][0] for r in members]))
            b = float(np.mean([w[r][1] for r in members]))
            out.update({r: (f, b, w[r][2]) for r in members})
        return out

    return change


def median_work(job: StepWork) -> Callable[[int, Work], Work]:
    medians = {r: tuple_median([w[r] for w in job.steps]) for r in job.steps[0]}
    return lambda _, w: {r: medians[r] for r in w}


def what_ifs(job: StepWork | None, slow: list[int], step_us: float, host: frozenset[int] = frozenset()) -> list[WhatIf]:
    """The step time under each what-if (a slow rank like its peers, balanced stages, work at its median); `host`:
    the slow ranks whose host work, not their compute, is what stands out."""
    if job is None or step_us <= 0:
        return []
    changes = [("like_peers", f"rank {r} ran like its peers", like_peers(job, r, host=r in host)) for r in slow]
    if len(slow) > 1:
        changes.append((ALL_LIKE_PEERS, "every slow rank ran like its peers", all_like_peers(job, slow, host)))
    changes += [
        ("balanced_stages", "the stages were balanced", balanced_stages(job)),
        ("median_work", "every step's work took its median", median_work(job)),
    ]
    return [replayed_what_if(kind, words, savings(job, change), step_us) for kind, words, change in changes]


REPLAYED = {Cause.STAGE_IMBALANCE: "balanced_stages"}
"""the what-if whose gain is a finding's"""


def with_replayed_gains(findings: list[JobFinding], whatifs: list[WhatIf]) -> list[JobFinding]:
    """The findings with the gain of their what-if where one was replayed, the largest gain first."""
    by_kind = {w.kind: w for w in whatifs}
    out = []
    for f in findings:
        w = by_kind.get(REPLAYED.get(f.cause, ""))
        out.append(f.model_copy(update={"gain_us": max(w.gain_us, 0.0)}) if w is not None else f)
    return sorted(out, key=lambda f: -f.gain_us)
