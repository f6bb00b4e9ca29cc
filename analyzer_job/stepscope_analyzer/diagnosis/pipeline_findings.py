"""Causes of a pipeline-parallel job's own shape: its stages compared as stages, its schedule's bubble, its data.
Pure.

With the layout (diagnosis.layout) and each rank's compute per recorded step (forward + backward + optimizer;
without CPU-contention stretches on CPU ranks, diagnosis.rank_costs):
- stage imbalance: a stage's compute per step (the median of its ranks') is at least STAGE_RATIO times the median
  of the other stages', every one of its ranks computes more than every rank of the other stages, and its excess in
  wall-clock time reaches the user's floor. CPU ranks are compared by their op work instead (op_work: their op calls
  at their least time, summed per step), which waiting for a CPU does not raise, against the same STAGE_RATIO, and
  every rank of the stage must do STAGE_RATIO times the work of every rank of the others (a call stretched in every
  recorded step leaves one replica's floors high); without op work, by their compute without contention stretches
  against CPU_STAGE_RATIO. The pipeline runs at its slowest
  stage's pace, for every microbatch and the schedule's warm-up and cool-down: balanced stages (the same total
  compute spread evenly) would save (M + S - 1) / M times the stage's excess over the stages' mean per step (M
  microbatches, S stages), at most the step's share of it (diagnosis.replay's what-if replaces this estimate
  where the steps can be replayed);
- pipeline bubble: a GPipe or 1F1B schedule idles each stage (S - 1) / (M + S - 1) of its step in warm-up and
  cool-down (the trace does not say which of the two ran; both idle as long);
  at BUBBLE_SHARE or more, and with the ranks measured blocked at least half that share of their step, it is
  named, with what twice the microbatches would leave;
- data imbalance: no rank is slow among its peers, but the ranks' work varies from step to step (GPU ranks: compute
  per step by DATA_CV, its coefficient of variation, median rank; CPU ranks: their op calls' least times between
  even and odd steps by DATA_FLOOR_NOISE, function `variation`): the inputs' sizes vary (unpacked sequences) and in
  every step the replicas of a stage wait for whichever drew the longest inputs. Inputs of varying size change how
  long a rank's op calls take, not how many it makes: where a rank makes floor_ratio times its peers' op calls per
  step (floor_test.call_ratios: a layer run twice, more microbatches), its extra work is in every step, and the
  variation is not named the data's. What it costs: per step, the most
  a stage's replica computes beyond the median replica in wall-clock time, averaged over the steps, the largest
  stage's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.diagnosis.causes import cause_row
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.floor_test import call_ratios, floor_effects
from stepscope_analyzer.diagnosis.layout import Layout
from stepscope_analyzer.diagnosis.rank_costs import rank_samples
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Cause, Evidence, JobFinding, RankReport

F64 = npt.NDArray[np.float64]
STAGE_RATIO = 1.3
"""a stage computing this many times the median of the other stages' compute per step is imbalanced (GPU ranks)"""
CPU_STAGE_RATIO = 1.8
"""the same for CPU ranks without op work (summaries without call floors' total), by their compute: on a shared CPU
the stages compete for cores unevenly (the last stage of a healthy pp4 x dp2 job on two oversubscribed cores
computed 1.73x the others' median, after the contention correction)"""
BUBBLE_SHARE = 1 / 3
"""a schedule whose warm-up and cool-down take this share of the step is worth more microbatches"""
DATA_CV = 0.05
"""a GPU rank's compute per step varying this much (coefficient of variation over its steps) means varying inputs
(healthy GPU ranks vary by about 1%)"""
DATA_FLOOR_NOISE = 0.15
"""CPU ranks: the split-half noise of their call floors (a log ratio) at which the work varies with the inputs;
fixed-shape pipeline jobs on two oversubscribed cores showed up to 0.08 on a stage, sequence lengths of 8-96 tokens
per microbatch 0.2-0.74 (the median stage: 0.23 over 6 steps of pp4, 0.72 of pp2)"""
CPU_DATA_CV = 0.15
"""the same for CPU ranks, whose compute the contention correction leaves noisier (healthy ranks of pp4 x dp2 on two
oversubscribed cores: up to 0.17 on one rank, under 0.1 on the median rank)"""


def _stage_compute(layout: Layout, compute: dict[int, F64]) -> dict[int, list[float]]:
    """stage -> its ranks' median compute per step."""
    out: dict[int, list[float]] = {}
    for rank, values in compute.items():
        out.setdefault(layout.stage.get(rank, 0), []).append(float(np.median(values)))
    return out


OP_WORK = "op work"


def op_work(ranks: dict[int, RankReport]) -> dict[int, F64] | None:
    """CPU ranks: each rank's op calls per step at their least time, summed (CallFloors.total_us: what waiting for a
    CPU does not raise); None unless every rank has it."""
    work = {k: r.call_floors.total_us for k, r in ranks.items() if r.call_floors is not None}
    if len(work) < len(ranks) or not all(v > 0 for v in work.values()):
        return None
    return {k: np.asarray([v]) for k, v in work.items()}


def stage_imbalance(
    layout: Layout,
    compute: dict[int, F64],
    step_us: float,
    microbatches: int | None,
    cfg: DiagnosisConfig,
    *,
    threshold: float = STAGE_RATIO,
    wall: dict[int, F64] | None = None,
    measure: str = "compute",
    pairwise: bool = False,
) -> JobFinding | None:
    """`compute`: per rank, compute per step as tested (without CPU-contention stretches), or its op work at its
    least (`measure` names it in the finding); `wall`: the same in wall-clock time (what the job pays), which the
    user's floor applies to (default: `compute`). `pairwise`: every rank of the stage must reach `threshold` times
    every rank of the others, not only the stages' medians (op work: a call stretched in every recorded step keeps
    one rank's floors high, and the ratio must clear that spread between replicas)."""
    stages = _stage_compute(layout, compute)
    if len(stages) < 2:
        return None
    level = {s: median(v) for s, v in stages.items()}
    heavy = max(level, key=lambda s: level[s])
    others = [level[s] for s in level if s != heavy]
    rest = median(others)
    apart = threshold if pairwise else 1.0
    separated = min(stages[heavy]) > apart * max(v for s, vs in stages.items() if s != heavy for v in vs)
    paid = {s: median(v) for s, v in _stage_compute(layout, wall if wall is not None else compute).items()}
    excess = paid[heavy] - median([v for s, v in paid.items() if s != heavy])
    if rest <= 0 or level[heavy] < threshold * rest or not separated or excess < cfg.floor_us(step_us):
        return None
    mean = float(np.mean(list(level.values())))
    m, s = microbatches or 1, len(stages)
    gain = min((level[heavy] - mean) * (m + s - 1) / m, 0.9 * step_us)
    ranks = sorted(r for r in compute if layout.stage.get(r, 0) == heavy)
    ratio = level[heavy] / rest
    figures = f"{level[heavy] / 1000:,.1f} ms vs {rest / 1000:,.1f} ms"
    how = (
        f"computes {ratio:.2f}x the other stages per step ({figures})"
        if measure == "compute"
        else f"does {ratio:.2f}x the other stages' {measure} per step (its op calls at their least time: {figures})"
    )
    summary = f"pipeline stage {heavy} (rank {format_rank_set(ranks)}) {how}: the pipeline runs at its pace"
    evidence = [
        Evidence(
            metric=f"stage {k} {measure} per step",
            value=v,
            baseline=rest,
            detail=f"stage {k}: {v / 1000:,.1f} ms of {measure} per step (its ranks' median)",
        )
        for k, v in sorted(level.items())
    ]
    return JobFinding(cause=Cause.STAGE_IMBALANCE, summary=summary, ranks=ranks, stage=heavy, gain_us=round(gain, 1),
                      remedy=cause_row(Cause.STAGE_IMBALANCE).next_step.format(r=format_rank_set(ranks)),
                      evidence=evidence)  # fmt: skip


def pipeline_bubble(
    layout: Layout, ranks: list[RankReport], step_us: float, microbatches: int | None
) -> JobFinding | None:
    if microbatches is None or microbatches < 1 or layout.stages < 2:
        return None
    s, m = layout.stages, microbatches
    share = (s - 1) / (m + s - 1)
    blocked = median([r.phases.communication_wait / r.steps.median_us for r in ranks if r.phases and r.steps.median_us])
    if share < BUBBLE_SHARE or blocked < share / 2:
        return None
    doubled = (s - 1) / (2 * m + s - 1)
    gain = step_us * (share - doubled)
    summary = (
        f"pipeline bubble: {s} stages with {m} microbatches idle {share:.0%} of each step in the schedule's "
        f"warm-up and cool-down (the ranks are blocked {blocked:.0%} of their step)"
    )
    evidence = [
        Evidence(metric="schedule bubble", value=share, baseline=doubled, unit="share of step",
                 detail=f"(S-1)/(M+S-1) with S={s}, M={m}: {share:.0%}; with {2 * m} microbatches {doubled:.0%}"),
        Evidence(metric="blocked share", value=blocked, baseline=share, unit="share of step",
                 detail=f"the ranks' median time blocked in sends, receives and collectives: {blocked:.0%} of a step"),
    ]  # fmt: skip
    who = sorted(r.rank for r in ranks)
    return JobFinding(cause=Cause.PIPELINE_BUBBLE, summary=summary, ranks=who, gain_us=round(gain, 1),
                      remedy=cause_row(Cause.PIPELINE_BUBBLE).next_step.format(r=format_rank_set(who)),
                      evidence=evidence)  # fmt: skip


@dataclass(frozen=True)
class Variation:
    """How much the ranks' work varies from step to step, and how that was measured."""

    value: float
    threshold: float
    metric: str
    unit: str
    words: str


def variation(ranks: list[RankReport], layout: Layout, compute: dict[int, F64], gpu: bool) -> Variation:
    """GPU ranks: the median rank's coefficient of variation of compute per step. CPU ranks: the split-half noise
    of their call floors (diagnosis.floor_test, the largest of a stage's, the median over the stages) where they
    carry floors, as contention does not move a call's least time and the correction for it divides longer steps
    out; else the compute's variation against CPU_DATA_CV."""
    spreads = [float(np.std(v) / np.mean(v)) for v in compute.values() if v.size >= 3 and np.mean(v) > 0]
    cv = median(spreads) if spreads else 0.0
    if gpu:
        return Variation(cv, DATA_CV, "compute variation over steps", "cv",
                         f"compute per step varies {cv:.0%} (coefficient of variation, median rank)")  # fmt: skip
    noises = []
    for peers in layout.peers([r.rank for r in ranks]):
        effects = floor_effects([r for r in ranks if r.rank in peers])
        if effects:
            noises.append(max(e.noise for e in effects.values()))
    if noises:
        noise = median(noises)
        return Variation(noise, DATA_FLOOR_NOISE, "op calls' least time, even vs odd steps", "log ratio",
                         f"the same op calls' least time differs by {math.exp(noise):.2f}x between even and odd "
                         "steps (median stage): their work changes with the inputs")  # fmt: skip
    return Variation(cv, CPU_DATA_CV, "compute variation over steps", "cv",
                     f"compute per step varies {cv:.0%} (coefficient of variation, median rank)")  # fmt: skip


def data_imbalance(
    layout: Layout, wall: dict[int, F64], step_us: float, cfg: DiagnosisConfig, varies: Variation
) -> JobFinding | None:
    """`wall`: compute per step in wall-clock time (its cost); `varies`: how much the work varies."""
    if varies.value < varies.threshold:
        return None
    cost = 0.0
    for stage in sorted(set(layout.stage.get(r, 0) for r in wall)):
        rows = [v for r, v in wall.items() if layout.stage.get(r, 0) == stage]
        n = min(v.size for v in rows)
        if len(rows) < 2 or n == 0:
            continue
        table = np.stack([v[:n] for v in rows])
        cost = max(cost, float(np.mean(table.max(axis=0) - np.median(table, axis=0))))
    if cost < cfg.floor_us(step_us):
        return None
    summary = (
        f"data imbalance: {varies.words}, no rank persistently slower: the replicas of a stage wait for whichever "
        "drew the largest inputs"
    )
    evidence = [Evidence(metric=varies.metric, value=varies.value, baseline=varies.threshold, unit=varies.unit,
                         detail=f"{varies.words}; the replicas' wait for the largest inputs: {cost / 1000:,.1f} ms "
                         "per step")]  # fmt: skip
    return JobFinding(cause=Cause.DATA_IMBALANCE, summary=summary, ranks=sorted(wall), gain_us=round(cost, 1),
                      remedy=cause_row(Cause.DATA_IMBALANCE).next_step.format(r=format_rank_set(sorted(wall))),
                      evidence=evidence)  # fmt: skip


def more_calls(ranks: list[RankReport], layout: Layout, ratio: float) -> list[int]:
    """The ranks that make `ratio` times or more the op calls per step of their peers (floor_test.call_ratios, CPU
    ranks with call floors)."""
    by_rank = {r.rank: r for r in ranks}
    out = []
    for peers in layout.peers(list(by_rank)):
        calls = call_ratios([by_rank[r] for r in peers]) if len(peers) >= 2 else {}
        out += [r for r, v in calls.items() if v >= ratio]
    return sorted(out)


def _stage_measure(
    ranks: list[RankReport], compute: dict[int, F64], gpu: bool
) -> tuple[dict[int, F64], str, float, bool]:
    """What the stages are compared by (values per rank, its name, the ratio, pairwise): GPU ranks by their compute
    against STAGE_RATIO; CPU ranks by their op work against the same ratio, rank by rank, or without op work by their
    compute against CPU_STAGE_RATIO."""
    if gpu:
        return compute, "compute", STAGE_RATIO, False
    work = op_work({r.rank: r for r in ranks if r.rank in compute})
    if work is not None:
        return work, OP_WORK, STAGE_RATIO, True
    return compute, "compute", CPU_STAGE_RATIO, False


def pipeline_findings(
    layout: Layout | None,
    ranks: list[RankReport],
    step_us: float,
    microbatches: int | None,
    cfg: DiagnosisConfig,
    *,
    slow: set[int],
) -> list[JobFinding]:
    """The job-shape findings, the largest gain first; `slow`: the ranks found slow among their peers (their stages
    are measured without them, and varying compute is theirs, not the data's)."""
    if layout is None or layout.stages < 2 or len(ranks) < 2:
        return []
    samples = [s for s in rank_samples(ranks) if s.rank not in slow]
    compute = {s.rank: s.tested["compute"] for s in samples}
    wall = {s.rank: s.costs["compute"] for s in samples}
    gpu = all(r.device == "cuda" for r in ranks)
    values, measure, threshold, pairwise = _stage_measure(ranks, compute, gpu)
    found = [
        stage_imbalance(
            layout,
            values,
            step_us,
            microbatches,
            cfg,
            threshold=threshold,
            wall=wall,
            measure=measure,
            pairwise=pairwise,
        ),
        pipeline_bubble(layout, ranks, step_us, microbatches),
        None
        if slow or more_calls(ranks, layout, cfg.floor_ratio)
        else data_imbalance(layout, wall, step_us, cfg, variation(ranks, layout, compute, gpu)),
    ]
    return sorted((f for f in found if f is not None), key=lambda f: -f.gain_us)
