"""The cross-rank diagnosis: the job's facts once (diagnosis.facts), every detector over them
(diagnosis.detector_table), the findings ranked by their replayed gain (diagnosis.ranking), then the verdict and the
tables of the report. Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.comparison import with_comparisons
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.detector_table import detect_all
from stepscope_analyzer.diagnosis.facts import Found, JobFacts, dumped_groups, job_facts
from stepscope_analyzer.diagnosis.gpu_throttle import with_gpu_evidence
from stepscope_analyzer.diagnosis.hangs import HangEvidence, dumps_only_verdict
from stepscope_analyzer.diagnosis.job_tables import communication_summary, top_bottlenecks
from stepscope_analyzer.diagnosis.memory_evidence import with_memory_evidence
from stepscope_analyzer.diagnosis.nodes import find_slow_nodes
from stepscope_analyzer.diagnosis.op_types import by_op_type
from stepscope_analyzer.diagnosis.ranking import Ranked, ranked
from stepscope_analyzer.diagnosis.shape_verdict import finding_verdict
from stepscope_analyzer.diagnosis.step_makeup import step_makeup
from stepscope_analyzer.diagnosis.verdict import Coverage, headline, next_steps, verdict_line
from stepscope_analyzer.flight_recorder import Dump
from stepscope_contract.report import Diagnosis, RankReport, SlowNode

__all__ = ["diagnose", "dumped_groups"]


def _verdict(facts: JobFacts, r: Ranked, nodes: list[SlowNode], under_floor: tuple[str, ...]) -> str:
    ok = facts.ok
    coverage = Coverage(
        analysed=facts.analysed, errored=facts.failed, world_size=facts.world, other_jobs=facts.other_jobs,
        makeup=step_makeup(ok), under_floor=under_floor,
    )  # fmt: skip
    hangs = facts.hang.hangs
    verdict = facts.hang.verdict or (None if ok else dumps_only_verdict(facts.hang.flight_recorder))
    verdict = verdict or finding_verdict(r.findings, r.slow, hangs, r.numbers, coverage, layout=facts.shape,
                                         nodes=nodes)  # fmt: skip
    return verdict or verdict_line(r.slow, hangs, nodes, r.numbers, coverage)


def _diagnosis(facts: JobFacts, found: Found, cfg: DiagnosisConfig) -> Diagnosis:
    ok, hangs = facts.ok, facts.hang.hangs
    r = ranked(facts, found, cfg)
    nodes = find_slow_nodes(r.slow, facts.node_of)
    bottlenecks = top_bottlenecks(ok, cfg.max_bottlenecks)
    return Diagnosis(
        verdict=_verdict(facts, r, nodes, found.under_floor),
        headline=headline(r.slow, hangs, bottlenecks, r.findings),
        ranks_analysed=facts.analysed,
        ranks_expected=facts.world,
        median_step_us=r.numbers.median_step_us,
        p90_step_us=r.numbers.p90_step_us,
        mean_step_us=r.numbers.mean_step_us,
        expected_step_us=r.numbers.expected_step_us,
        estimated_speedup=r.numbers.estimated_speedup,
        slow_ranks=r.slow,
        slow_nodes=nodes,
        hangs=hangs,
        flight_recorder=facts.hang.flight_recorder,
        bottlenecks=bottlenecks,
        communication=communication_summary(ok, cfg.max_collectives),
        next_steps=[f.remedy for f in r.findings] + next_steps(r.slow, bottlenecks, facts.errored),
        layout=facts.shape,
        findings=r.findings,
        what_if=r.what_ifs,
        waits=facts.waits,
        by_op_type=by_op_type(ok, [s for s in r.slow if s.cause not in STANDSTILL], facts.layout),
    )


def diagnose(
    ranks: list[RankReport],
    hang_evidence: list[HangEvidence] | None = None,
    config: DiagnosisConfig | None = None,
    *,
    nodes: dict[int, str] | None = None,
    world_size: int | None = None,
    other_jobs: str | None = None,
    flight_recorder: dict[int, Dump] | None = None,
    analysed: int | None = None,
) -> Diagnosis:
    """Diagnose a job from its per-rank summaries (any status) and hang evidence from storage.

    Only ranks with status ok are compared; hung ranks come from `hang_evidence` and from summaries with
    status hung; `nodes` (rank -> node) fills in nodes the summaries lack; `world_size` is the job's, to say how
    many of its ranks were seen; `other_jobs` says which ranks were left out as another job's (they are errors,
    not counted as ranks that could not be analysed); `flight_recorder` (rank -> dump) are the ranks' Flight
    Recorder dumps, read for hangs and desyncs. `analysed`: how many ranks were analysed when `ranks` holds only
    those the reduce compares in full (ranks/candidates.py), else the ranks with status ok.
    """
    cfg = config or DiagnosisConfig()
    facts = job_facts(
        ranks,
        hang_evidence,
        nodes=nodes,
        world_size=world_size,
        other_jobs=other_jobs,
        flight_recorder=flight_recorder,
        analysed=analysed,
    )
    diagnosis = _diagnosis(facts, detect_all(facts, cfg), cfg)
    ok = facts.ok
    return with_comparisons(with_memory_evidence(with_gpu_evidence(diagnosis, ok), ok), ok)
