"""The job's shared facts, computed once before any cause is looked for, and what the detectors found. Pure.

Every detector (diagnosis.detectors) reads the same `JobFacts`: the analysed ranks, the layout (stages, replicas,
groups), the standstill evidence (stacks, Flight Recorder dumps), the ranks' communication calls in columns (built
once: diagnosis.waits.call_table) with the matched waits read from them (who waits for whom in which call), the step
numbers, and on first use the per-rank, per-step samples of each cost with the job's noise (diagnosis.rank_costs),
the steps' work for the replay (diagnosis.replay) and who arrived last at each matched collective (from the same
columns). `found` is what the detectors before
it in the table found (slow ranks, job findings): a detector that qualifies them (the ranks of a tensor-parallel
group, the stages measured without their slow ranks) reads it there.

The facts are built from the ranks' summaries (`job_facts`); a detector reads per-rank figures only through them,
so another source of the same figures (a table of per-rank numbers) builds the same object.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from stepscope_analyzer.diagnosis.dp_replay import DpWork, dp_work
from stepscope_analyzer.diagnosis.hangs import HangEvidence, HangFindings, find_hangs
from stepscope_analyzer.diagnosis.job_numbers import StepNumbers, step_numbers
from stepscope_analyzer.diagnosis.layout import Layout, job_layout, layout_model
from stepscope_analyzer.diagnosis.rank_costs import RankSamples, rank_samples, with_collective_waits
from stepscope_analyzer.diagnosis.replay import StepWork, step_work
from stepscope_analyzer.diagnosis.waits import Arrival, CallTable, arrivals_of, call_table, waits_of
from stepscope_analyzer.flight_recorder import Dump
from stepscope_contract.report import (
    Cause,
    JobFinding,
    ParallelLayout,
    ProcessGroup,
    RankReport,
    RankStatus,
    RankWaits,
    SlowRank,
)


@dataclass(frozen=True)
class Found:
    """What detectors found: ranks slow among their peers (or holding a standstill up) and findings of the job."""

    slow_ranks: tuple[SlowRank, ...] = ()
    findings: tuple[JobFinding, ...] = ()
    explains: frozenset[int] = frozenset()
    """ranks whose extra compute this detector's cause accounts for (the routing's, not the worker's): they are no
    longer slow workers once it has spoken"""
    under_floor: tuple[str, ...] = ()
    """what a detector saw that costs the job less than the user's floor, said when no rank is slow"""

    def merged(self, later: Found) -> Found:
        kept = tuple(s for s in self.slow_ranks if not (s.rank in later.explains and s.cause is Cause.COMPUTE))
        return Found(kept + later.slow_ranks, self.findings + later.findings,
                     under_floor=self.under_floor + later.under_floor)  # fmt: skip


@dataclass
class _Memo:
    """Facts derived on first use, shared by every view of the same job's facts."""

    samples: list[RankSamples] | None = None
    work: tuple[StepWork | None] | None = None
    arrivals: list[Arrival] | None = None
    calls: tuple[CallTable | None] | None = None
    """the ranks' calls in columns: built for the matched waits, read again for the arrivals"""
    dp_work: tuple[DpWork | None] | None = None
    """the data-parallel replay's work table: read by the permutation test, the ranking and the what-ifs"""


@dataclass(frozen=True)
class JobFacts:
    ok: list[RankReport]
    """the ranks analysed (status ok), with their collective waits"""
    layout: Layout | None
    shape: ParallelLayout | None
    """the layout as report.json tells it (stages, replicas, microbatches)"""
    hang: HangFindings
    """the standstill: hung ranks, culprits (from stacks and dumps), the Flight Recorder's findings"""
    node_of: dict[int, str | None]
    waits: list[RankWaits]
    """each rank that waits in matched calls: for whom, per step"""
    numbers: StepNumbers
    """the job's step numbers before any slow rank is named (median, p90, mean)"""
    world: int | None
    failed: int
    """ranks read but not analysed (not another job's)"""
    errored: int
    """... and ranks that uploaded nothing"""
    other_jobs: str | None = None
    analysed_count: int | None = None
    """how many ranks were analysed when `ok` holds only those the reduce compares in full (ranks/candidates.py)"""
    found: Found = Found()
    _memo: _Memo = field(default_factory=_Memo, compare=False, repr=False)

    @property
    def analysed(self) -> int:
        """how many ranks were analysed: all of them, even where `ok` holds only those compared in full"""
        return len(self.ok) if self.analysed_count is None else self.analysed_count

    @property
    def microbatches(self) -> int | None:
        return self.shape.microbatches if self.shape is not None else None

    @property
    def hung(self) -> frozenset[int]:
        """the ranks of the standstill (hung, or named its culprit)"""
        return frozenset({h.rank for h in self.hang.hangs} | {s.rank for s in self.hang.slow_ranks})

    @property
    def samples(self) -> list[RankSamples]:
        """each analysed rank's per-step costs, tested and in wall-clock time (diagnosis.rank_costs)"""
        if self._memo.samples is None:
            self._memo.samples = rank_samples(self.ok)
        return self._memo.samples

    @property
    def step_work(self) -> StepWork | None:
        """each rank's work per recorded step, as the pipeline replay takes it (None without stages)"""
        if self._memo.work is None:
            work = step_work(self.layout, self.ok, self.microbatches) if self.layout is not None else None
            self._memo.work = (work,)
        return self._memo.work[0]

    @property
    def arrivals(self) -> list[Arrival]:
        """every matched collective with the member that arrived last (diagnosis.waits)"""
        if self._memo.arrivals is None:
            self._memo.arrivals = arrivals_of(self.calls)
        return self._memo.arrivals

    @property
    def calls(self) -> CallTable | None:
        """every analysed rank's communication calls in columns (diagnosis.waits), None without calls"""
        if self._memo.calls is None:
            self._memo.calls = (call_table(self.ok, self.layout),)
        return self._memo.calls[0]

    @property
    def dp_work(self) -> DpWork | None:
        """each rank's work per recorded step as the data-parallel replay takes it (diagnosis.dp_replay; None with
        stages, or where the ranks recorded different numbers of steps)"""
        if self._memo.dp_work is None:
            self._memo.dp_work = (dp_work(self.ok, self.samples) if self.layout is None else None,)
        return self._memo.dp_work[0]

    def seeing(self, found: Found) -> JobFacts:
        """The same facts (derived ones shared) with what the detectors found so far."""
        return dataclasses.replace(self, found=found)


def _hang_evidence(ranks: list[RankReport], hang_evidence: list[HangEvidence] | None) -> list[HangEvidence]:
    evidence = [e for e in hang_evidence or [] if e.hung]
    known = {e.rank for e in evidence}
    evidence += [
        HangEvidence(rank=r.rank, hung=True, node=r.node)
        for r in ranks
        if r.status is RankStatus.HUNG and r.rank not in known
    ]
    return evidence


def _nodes_of(
    ranks: list[RankReport], evidence: list[HangEvidence], nodes: dict[int, str] | None
) -> dict[int, str | None]:
    node_of: dict[int, str | None] = {r.rank: r.node for r in ranks}
    for e in evidence:
        node_of.setdefault(e.rank, e.node)
    for rank, node in (nodes or {}).items():
        if not node_of.get(rank):
            node_of[rank] = node
    return node_of


def dumped_groups(dumps: dict[int, Dump] | None) -> list[ProcessGroup]:
    """The process groups the ranks' Flight Recorder dumps list (name, description, members)."""
    out = []
    for dump in (dumps or {}).values():
        for name, ranks in dump.group_ranks().items():
            cfg = next((c for k, c in dump.pg_config.items() if (c.name or k) == name), None)
            out.append(ProcessGroup(name=name, desc=cfg.desc if cfg else "", ranks=ranks))
    return out


def _not_analysed(ranks: list[RankReport]) -> tuple[int, int]:
    """(ranks read but not analysed, those and the ranks that uploaded nothing); another job's ranks are neither."""
    errors = [r for r in ranks if r.status is RankStatus.ERROR]
    failed = len(errors) - sum(1 for r in errors if (r.error or "").startswith("from a different job"))
    return failed, failed + sum(1 for r in ranks if r.status is RankStatus.MISSING)


def job_facts(
    ranks: list[RankReport],
    hang_evidence: list[HangEvidence] | None = None,
    *,
    nodes: dict[int, str] | None = None,
    world_size: int | None = None,
    other_jobs: str | None = None,
    flight_recorder: dict[int, Dump] | None = None,
    analysed: int | None = None,
) -> JobFacts:
    """The facts of a job from its per-rank summaries (any status) and the hang evidence in storage (see
    diagnosis.diagnose for the arguments)."""
    ok = with_collective_waits([r for r in ranks if r.status is RankStatus.OK])
    failed, errored = _not_analysed(ranks)
    evidence = _hang_evidence(ranks, hang_evidence)
    sizes = [r.world_size for r in ranks if r.world_size]
    world = world_size or (max(sizes) if sizes else None)
    layout = job_layout(ok, dumped_groups(flight_recorder))
    calls = call_table(ok, layout)
    return JobFacts(
        ok=ok,
        layout=layout,
        shape=layout_model(layout, ok) if layout is not None else None,
        hang=find_hangs(evidence, flight_recorder, world, healthy={r.rank for r in ok}),
        node_of=_nodes_of(ranks, evidence, nodes),
        waits=waits_of(calls),
        numbers=step_numbers(ok, []),
        world=world,
        failed=failed,
        errored=errored,
        other_jobs=other_jobs,
        analysed_count=analysed,
        _memo=_Memo(calls=(calls,)),
    )
