"""What-if replay of a pipeline job's steps: the step time if one thing ran differently. Pure.

Each recorded step is replayed through its dependencies: in every replica each stage runs its microbatches'
forwards and backwards in the 1F1B order (min(S - s - 1, M) warm-up forwards, then one forward and one backward
in turn, then the cool-down backwards), a forward after the previous stage's forward of the same microbatch (a P2P
edge), a backward after the next stage's backward (the last stage's after its own forward); then the replicas of
each stage join in their gradients' all_reduce, and the step ends when the last stage group has joined. A rank's
microbatches take its recorded forward and backward time of that step, shared evenly over the microbatches (the
traces time whole steps). The replayed step is a model: what-ifs are read as differences, the recorded step less
(replayed now - replayed with the change), averaged over the steps.

What-ifs: a slow rank running like its peers (its time each step the median of its stage's other replicas'),
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
from stepscope_contract.report import Cause, JobFinding, RankReport, WhatIf

Work = dict[int, tuple[float, float]]
"""rank -> (forward µs, backward µs) of one step"""


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


def replay_step(job: StepWork, work: Work) -> float:
    """The replayed duration of one step with `work` (see the module docstring)."""
    m = max(job.microbatches, 1)
    joins = [0.0] * job.stages
    for d in range(job.replicas):
        per = []
        for s in range(job.stages):
            rank = job.cells.get((s, d))
            f, b = work.get(rank, (0.0, 0.0)) if rank is not None else (0.0, 0.0)
            per.append((f / m, b / m))
        for s, end in enumerate(_replica_ends(job.stages, m, per)):
            joins[s] = max(joins[s], end)
    return max(joins)


def step_work(layout: Layout, ranks: list[RankReport], microbatches: int | None) -> StepWork | None:
    """The recorded forward and backward time of every rank in every step, where every rank has the same steps."""
    counts = {len(r.step_phases) for r in ranks}
    if len(counts) != 1 or 0 in counts or layout.stages < 2:
        return None
    cells = {(layout.stage.get(r.rank, 0), layout.replica.get(r.rank, 0)): r.rank for r in ranks}
    steps = [
        {r.rank: (r.step_phases[t].forward, r.step_phases[t].backward) for r in ranks} for t in range(counts.pop())
    ]
    return StepWork(layout.stages, layout.replicas, microbatches or 1, cells, steps)


def savings(job: StepWork, change: Callable[[int, Work], Work]) -> list[float]:
    """Each recorded step's replayed saving with `change` (step index, recorded work -> changed work)."""
    return [replay_step(job, w) - replay_step(job, change(t, w)) for t, w in enumerate(job.steps)]


def what_if(job: StepWork, change: Callable[[int, Work], Work], step_us: float) -> float:
    """The step time with `change`: the recorded step less the mean replayed difference."""
    return max(step_us - float(np.mean(savings(job, change))), 0.0)


def like_peers(job: StepWork, rank: int, exclude: list[int] | None = None) -> Callable[[int, Work], Work]:
    stage = next((s for (s, _), r in job.cells.items() if r == rank), None)
    peers = [r for (s, _), r in job.cells.items() if s == stage and r != rank]
    peers = [r for r in peers if r not in (exclude or [])] or peers

    def change(_: int, w: Work) -> Work:
        if not peers:
            return w
        f = float(np.median([w[p][0] for p in peers]))
        b = float(np.median([w[p][1] for p in peers]))
        return {**w, rank: (f, b)}

    return change


def all_like_peers(job: StepWork, ranks: list[int]) -> Callable[[int, Work], Work]:
    """Every rank of `ranks` like its stage's replicas that are not among them (all of them where none is left)."""
    changes = [(r, like_peers(job, r, exclude=ranks)) for r in ranks]

    def change(t: int, w: Work) -> Work:
        return {**w, **{r: one(t, w)[r] for r, one in changes}}

    return change


def balanced_stages(job: StepWork) -> Callable[[int, Work], Work]:
    def change(_: int, w: Work) -> Work:
        out = dict(w)
        for d in range(job.replicas):
            members = [r for (_, rep), r in job.cells.items() if rep == d]
            f = float(np.mean([w[r][0] for r in members]))
            b = float(np.mean([w[r][1] for r in members]))
            out.update({r: (f, b) for r in members})
        return out

    return change


def median_work(job: StepWork) -> Callable[[int, Work], Work]:
    medians = {
        r: (float(np.median([w[r][0] for w in job.steps])), float(np.median([w[r][1] for w in job.steps])))
        for r in job.steps[0]
    }
    return lambda _, w: {r: medians[r] for r in w}


def what_ifs(job: StepWork | None, slow: list[int], step_us: float) -> list[WhatIf]:
    """The step time under each what-if (a slow rank like its peers, balanced stages, work at its median)."""
    if job is None or step_us <= 0:
        return []
    changes = [("like_peers", f"rank {r} ran like its peers", like_peers(job, r)) for r in slow]
    if len(slow) > 1:
        changes.append((ALL_LIKE_PEERS, "every slow rank ran like its peers", all_like_peers(job, slow)))
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
