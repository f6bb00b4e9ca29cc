"""The cross-rank diagnosis: slow ranks and nodes, hangs, bottlenecks, communication, verdict. Pure."""

from __future__ import annotations

from stepscope_analyzer.diagnosis.causes import STANDSTILL
from stepscope_analyzer.diagnosis.comparison import with_comparisons
from stepscope_analyzer.diagnosis.config import DiagnosisConfig
from stepscope_analyzer.diagnosis.dp_replay import dp_what_ifs
from stepscope_analyzer.diagnosis.expert_balance import expert_imbalance
from stepscope_analyzer.diagnosis.gpu_throttle import with_gpu_evidence
from stepscope_analyzer.diagnosis.hangs import HangEvidence, dumps_only_verdict, find_hangs
from stepscope_analyzer.diagnosis.job_numbers import step_numbers
from stepscope_analyzer.diagnosis.job_tables import communication_summary, top_bottlenecks
from stepscope_analyzer.diagnosis.layout import job_layout, layout_model
from stepscope_analyzer.diagnosis.memory_evidence import with_memory_evidence
from stepscope_analyzer.diagnosis.nodes import find_slow_nodes
from stepscope_analyzer.diagnosis.op_types import by_op_type
from stepscope_analyzer.diagnosis.peers import find_slow_peers
from stepscope_analyzer.diagnosis.pipeline_findings import pipeline_findings
from stepscope_analyzer.diagnosis.rank_costs import with_collective_waits
from stepscope_analyzer.diagnosis.replay import step_work, what_ifs, with_replayed_gains
from stepscope_analyzer.diagnosis.replayed_gain import replay_base, with_replayed_gain
from stepscope_analyzer.diagnosis.shape_verdict import finding_verdict, with_finding_numbers
from stepscope_analyzer.diagnosis.step_makeup import step_makeup
from stepscope_analyzer.diagnosis.tp_groups import tp_stragglers
from stepscope_analyzer.diagnosis.verdict import Coverage, headline, next_steps, verdict_line
from stepscope_analyzer.diagnosis.waits import matched_waits, with_waiters
from stepscope_analyzer.flight_recorder import Dump
from stepscope_contract.report import Diagnosis, ProcessGroup, RankReport, RankStatus


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
    those the reduce compares in full (reduce/candidates.py), else the ranks with status ok.
    """
    cfg = config or DiagnosisConfig()
    ok = with_collective_waits([r for r in ranks if r.status is RankStatus.OK])
    foreign = sum(
        1 for r in ranks if r.status is RankStatus.ERROR and (r.error or "").startswith("from a different job")
    )
    failed = sum(1 for r in ranks if r.status is RankStatus.ERROR) - foreign  # read, but could not be analysed
    errored = failed + sum(1 for r in ranks if r.status is RankStatus.MISSING)  # ... or nothing uploaded either
    evidence = _hang_evidence(ranks, hang_evidence)
    node_of = _nodes_of(ranks, evidence, nodes)
    sizes = [r.world_size for r in ranks if r.world_size]
    world = world_size or (max(sizes) if sizes else None)

    hang = find_hangs(evidence, flight_recorder, world, healthy={r.rank for r in ok})
    hangs, hang_ranks = hang.hangs, hang.slow_ranks
    hung = {h.rank for h in hangs} | {s.rank for s in hang_ranks}
    layout = job_layout(ok, dumped_groups(flight_recorder))
    slow = hang_ranks + find_slow_peers([r for r in ok if r.rank not in hung], cfg, layout)
    slow = [s if s.node else s.model_copy(update={"node": node_of.get(s.rank)}) for s in slow]
    waits = matched_waits(ok, layout)
    slow = with_waiters(slow, waits, STANDSTILL)
    experts, slow = expert_imbalance(ok, slow)
    slow_nodes = find_slow_nodes(slow, node_of)
    bottlenecks = top_bottlenecks(ok, cfg.max_bottlenecks)
    numbers = step_numbers(ok, slow)
    shape = layout_model(layout, ok) if layout is not None else None
    micro = shape.microbatches if shape is not None else None
    findings = pipeline_findings(layout, ok, numbers.median_step_us, micro, cfg, slow={s.rank for s in slow})
    findings += tp_stragglers(layout, slow, ok) + experts
    slow_ids, step_us = [s.rank for s in slow if s.cause not in STANDSTILL], replay_base(numbers)
    whatifs = (
        what_ifs(step_work(layout, ok, micro), slow_ids, step_us) if layout else dp_what_ifs(ok, slow_ids, step_us)
    )
    findings = with_replayed_gains(findings, whatifs)
    numbers = with_finding_numbers(with_replayed_gain(numbers, whatifs), findings, slow, hangs)
    count = len(ok) if analysed is None else analysed
    coverage = Coverage(analysed=count, errored=failed, world_size=world, other_jobs=other_jobs, makeup=step_makeup(ok))
    verdict = hang.verdict or (None if ok else dumps_only_verdict(hang.flight_recorder))
    verdict = verdict or finding_verdict(findings, slow, hangs, numbers, coverage, layout=shape, nodes=slow_nodes)
    diagnosis = Diagnosis(
        verdict=verdict or verdict_line(slow, hangs, slow_nodes, numbers, coverage),
        headline=headline(slow, hangs, bottlenecks, findings),
        ranks_analysed=count,
        ranks_expected=world,
        median_step_us=numbers.median_step_us,
        p90_step_us=numbers.p90_step_us,
        mean_step_us=numbers.mean_step_us,
        expected_step_us=numbers.expected_step_us,
        estimated_speedup=numbers.estimated_speedup,
        slow_ranks=slow,
        slow_nodes=slow_nodes,
        hangs=hangs,
        flight_recorder=hang.flight_recorder,
        bottlenecks=bottlenecks,
        communication=communication_summary(ok, cfg.max_collectives),
        next_steps=[f.remedy for f in findings] + next_steps(slow, bottlenecks, errored),
        layout=shape,
        findings=findings,
        what_if=whatifs,
        waits=waits,
        by_op_type=by_op_type(ok, [s for s in slow if s.cause not in STANDSTILL], layout),
    )
    return with_comparisons(with_memory_evidence(with_gpu_evidence(diagnosis, ok), ok), ok)
