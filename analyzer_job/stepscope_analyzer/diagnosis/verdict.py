"""The one verdict line and the next steps a person reads first. Pure.

The verdict names the cause, not the symptom: the slow rank, what it does (from the causes table), the numbers a
user reads (step time now and without the rank's excess, the speedup), and how many of the world's ranks were
seen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stepscope_analyzer.diagnosis.causes import STANDSTILL, cause_row
from stepscope_analyzer.diagnosis.evidence import every_nth, named
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers, per_step_words, slowdown_sentence
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Bottleneck, Cause, Evidence, Hang, JobFinding, SlowNode, SlowRank

WORK = frozenset({"kernel", "memory", "cpu_op", "collective", "runtime"})
"""what ran: tensor ops, kernels, copies, collectives"""
PLACES = frozenset({"user_annotation", "python", "host_gap"})
WHERE_IN_STEP = {"other": " outside forward/backward/optimizer", "data_loading": " while loading data"}
"""how the advice places an excess that falls outside the step's work"""
"""where it ran: a user's region, a Python function, host time between two known places"""


@dataclass(frozen=True)
class Coverage:
    analysed: int
    errored: int
    world_size: int | None
    other_jobs: str | None = None
    makeup: str = ""
    """where the step goes ('backward 41%, blocked in collectives 20%'), said when no rank is slow"""
    under_floor: tuple[str, ...] = ()
    """what the detectors saw under the user's floor (facts.Found.under_floor), said when no rank is slow"""

    def tail(self) -> str:
        """'; 4 of 4 ranks analysed' or '; only 2 of 128 ranks analysed: 126 were never seen'."""
        parts = []
        if self.errored:
            parts.append(f"{self.errored} rank(s) could not be analysed")
        if self.world_size and self.world_size > self.analysed + self.errored:
            unseen = self.world_size - self.analysed - self.errored
            parts.append(f"only {self.analysed} of {self.world_size} ranks analysed: {unseen} never seen")
        elif self.world_size:
            parts.append(f"{self.analysed} of {self.world_size} ranks analysed")
        if self.other_jobs:
            parts.append(self.other_jobs)
        return "; " + "; ".join(parts) if parts else ""


def hang_verdict(hang_culprits: list[SlowRank], hangs: list[Hang]) -> str:
    waiting = next((h.waiting_collective for h in hangs if h.waiting_collective), None)
    ranks = format_rank_set([s.rank for s in hang_culprits])
    where = f"; the others wait in {waiting}" if waiting else ""
    conf = hang_culprits[0].confidence
    return f"Hang: rank {ranks} stopped reaching step boundaries{where} (confidence {conf:.0%})."


def slow_verdict(slow: list[SlowRank], nodes: list[SlowNode], numbers: StepNumbers, coverage: Coverage) -> str:
    top = slow[0]
    where = f" on node {top.node}" if top.node else ""
    phase = f", mostly in {top.phase}" if top.phase else ""
    others = [s.rank for s in slow[1:]]
    more = f"; also slow: rank {format_rank_set(others)}" if others else ""
    node_text = f"; node {nodes[0].node} holds slow ranks {format_rank_set(nodes[0].ranks)}" if nodes else ""
    whose = f"rank {top.rank}'s" if not others else "the slow ranks'"
    return (
        f"Rank {top.rank}{where} slows the job: {cause_row(top.cause).verdict} "
        f"(cause {top.cause.value}, {_how_much(top, per_step_words(numbers))}{phase}, confidence "
        f"{top.confidence:.0%}){_waiters(top)}; {slowdown_sentence(numbers, whose)}{more}{node_text}{coverage.tail()}."
    )


def _waiters(s: SlowRank, most: int = 3) -> str:
    """'; ranks 0 and 3 wait for it (53.8 and 41.7 ms per step)': the slow rank's matched waiters, most first."""
    shown = s.waiters[:most]
    if not shown:
        return ""
    ranks = [str(w.rank) for w in shown]
    who = f"rank {ranks[0]} waits" if len(ranks) == 1 else f"ranks {_and(ranks)} wait"
    more = f", and {len(s.waiters) - most} more" if len(s.waiters) > most else ""
    return f"; {who} for it ({_and([f'{w.us_per_step / 1000:,.1f}' for w in shown])} ms per step{more})"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _how_much(s: SlowRank, per: str) -> str:
    """'+6.8 ms per step' (or `per` another unit), or for a rank that stalls intermittently 'stalls of ~151 ms in 3
    of 8 recorded steps (every 3 steps), +36.8 ms per step on average'."""
    per_step = f"+{s.excess_us / 1000:,.1f} ms {per}"
    if not s.stalled_steps or s.stall_us is None:
        return per_step
    period = every_nth(s.stalled_steps)
    every = f" (every {period} steps)" if period else ""
    of = f" of {s.steps_recorded}" if s.steps_recorded else ""
    count = len(s.stalled_steps)
    return f"stalls of ~{s.stall_us / 1000:,.0f} ms in {count}{of} recorded steps{every}, {per_step} on average"


def verdict_line(
    slow: list[SlowRank],
    hangs: list[Hang],
    nodes: list[SlowNode],
    numbers: StepNumbers,
    coverage: Coverage,
) -> str:
    if coverage.analysed == 0 and not hangs:
        return f"No rank could be analysed ({coverage.errored} with errors); see the per-rank errors."
    hang_culprits = [s for s in slow if s.cause in STANDSTILL]
    if hang_culprits:
        return hang_verdict(hang_culprits, hangs)
    if slow:
        return slow_verdict(slow, nodes, numbers, coverage)
    makeup = f": {coverage.makeup}" if coverage.makeup else ""
    known = numbers.median_step_us > 0 or numbers.window_us > 0
    steps = f" ({slowdown_sentence(numbers, '')}{makeup})" if known else ""
    if coverage.analysed == 1:
        return f"One rank analysed: no other rank to compare it with{steps}{coverage.tail()}."
    seen = "".join(f"; {x}" for x in coverage.under_floor)
    return f"No slow rank: the {coverage.analysed} analysed ranks are balanced{steps}{seen}{coverage.tail()}."


def top_named(s: SlowRank, kinds: frozenset[str]) -> Evidence | None:
    """The slow rank's name evidence of one of `kinds` that exceeds the other ranks the most."""
    return next((e for e in s.evidence if named(e) in kinds), None)


def _per_step(e: Evidence) -> str:
    others = f"{e.baseline / 1000:,.1f} ms on the other ranks" if e.baseline > 0 else "none on the other ranks"
    return f"{e.value / 1000:,.1f} ms of {e.metric} per step ({others})"


def advice(s: SlowRank) -> str:
    """What to look at next for a slow rank: its cause's advice, led by the top evidence (what ran, and where)."""
    generic = cause_row(s.cause).next_step.format(r=s.rank)
    work, place = top_named(s, WORK), top_named(s, PLACES)
    if s.cause is Cause.HOST:
        work, place = place or work, None
    if work is None:
        return generic
    outside = {"other": " outside forward/backward/optimizer", "data_loading": " while loading data"}.get(
        s.phase or "", ""
    )
    where = f" in {place.metric}" if place is not None else ""
    verb = "spends" if s.cause is Cause.HOST else "runs"
    return f"Rank {s.rank} {verb} {_per_step(work)}{outside}{where}. {generic}"


def headline(
    slow: list[SlowRank], hangs: list[Hang], bottlenecks: list[Bottleneck], findings: Sequence[JobFinding] = ()
) -> str | None:
    """The one name that stands for the cause (status.summary.topBottleneck, the BOTTLENECK column): where a hung
    rank is stuck, what the slowest rank runs in its excess; with no culprit, what the job's top finding (a stage,
    the schedule, the data) departs most in; else the top bottleneck across ranks."""
    culprit = next((h for h in hangs if h.culprit), None)
    if culprit is not None and (culprit.location or culprit.waiting_collective):
        at = f" at {culprit.location}" if culprit.location else ""
        return f"{culprit.waiting_collective}{at}" if culprit.waiting_collective else f"stuck{at}"
    if slow and slow[0].cause not in STANDSTILL:
        s = slow[0]
        kinds = (PLACES, WORK) if s.cause is Cause.HOST else (WORK, PLACES)
        top = top_named(s, kinds[0]) or top_named(s, kinds[1])
        return top.metric if top is not None else None
    if slow:
        return "stuck (no stacks captured)"
    if findings and findings[0].evidence:
        return max(findings[0].evidence, key=lambda e: e.value / e.baseline if e.baseline > 0 else 0.0).metric
    return bottlenecks[0].name if bottlenecks else None


def next_steps(slow: list[SlowRank], bottlenecks: list[Bottleneck], errored: int) -> list[str]:
    steps: list[str] = []
    seen: set[Cause] = set()
    for s in slow:
        if s.cause in seen:
            continue
        seen.add(s.cause)
        steps.append(advice(s))
    # with a slow rank, its advice is the next step; the job's top bottleneck (often the collective the others wait
    # for it in) is the chart's first bar, not a second answer
    if bottlenecks and not slow:
        b = bottlenecks[0]
        name = b.name if len(b.name) <= 120 else b.name[:117] + "..."
        steps.append(
            f"Top bottleneck across ranks: {name} ({b.category}, {b.bottleneck_ratio:.1%} of end-to-end time "
            "not overlapped by compute, waiting for other ranks left out)."
        )
    if errored:
        steps.append(f"{errored} rank(s) could not be analysed; see the per-rank errors.")
    if not steps:
        steps.append("Nothing stands out; profile more steps or a larger share of ranks to compare.")
    return steps
