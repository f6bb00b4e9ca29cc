"""The job's parallel layout: rank -> (pipeline stage, data-parallel replica, tensor-parallel position). Pure.

From the process groups the ranks' traces list (RankReport.process_groups, distributedInfo.pg_config), else the
groups of the ranks' Flight Recorder dumps (their pg_config), or, where neither lists any, from who meets whom: the
ranks that share a process group in their collectives' labels. Each rank lists only the groups it belongs to; the
union over the ranks is the job's groups. A group's dimension comes
 1. from its description, as frameworks name them: torchtitan's DeviceMesh (`mesh_pp`, `mesh_dp_shard`, `mesh_tp`),
    Megatron (`PIPELINE_MODEL_PARALLEL_GROUP`, `DATA_PARALLEL_GROUP`, `TENSOR_MODEL_PARALLEL_GROUP`), or any
    description whose words name exactly one dimension (pp/pipe/pipeline, dp/data/fsdp/shard/replicate,
    tp/tensor, cp/context, ep/expert); descriptions naming two (`TENSOR_AND_DATA_PARALLEL_GROUP`, `mesh_dp_cp`) or
    none (`EMBEDDING_GROUP`, `undefined`) name no dimension;
 2. where no description names one (DeepSpeed's pipeline engine, plain `new_group`s): from the groups' shape. The
    groups of one dimension are disjoint, of one size and one stride (the gap between consecutive members). Every
    framework numbers ranks with the tensor-parallel position fastest, then the data-parallel replica, then the
    stage, so the family with the largest stride is the pipeline when the ranks exchange point-to-point messages
    (send/recv: pipeline neighbours), and the data-parallel one otherwise; the next is data-parallel, the smallest
    of three tensor-parallel. One thing overrules the numbering (DeepSpeed numbers a pipeline's stages fastest):
    replicas run the same code, so the ranks of a data-parallel group issue the same collectives as many times,
    while a pipeline's stages (other layers, the head) need not: where exactly one family joins ranks that all
    issue the same collectives and another joins ranks that do not, the first is data-parallel and the second the
    pipeline.
A rank's stage is its position in its pipeline group (PipelineStage's stage index is its group rank), its replica
its position in its data-parallel group, its TP position its place in its tensor-parallel group. Ranks that do the
same work are its peers: the same stage in the other replicas and TP positions (tensor parallelism shards each
layer evenly over its group).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from stepscope_contract.report import GroupTime, LayoutRank, ParallelLayout, ProcessGroup, RankReport

WORDS = {
    "pp": frozenset({"pp", "pipe", "pipeline"}),
    "dp": frozenset({"dp", "data", "fsdp", "ddp", "shard", "replicate", "hsdp"}),
    "tp": frozenset({"tp", "tensor"}),
    "cp": frozenset({"cp", "context"}),
    "ep": frozenset({"ep", "expert", "moe"}),
}
P2P_WORDS = ("send", "recv", "sendrecv")


@dataclass(frozen=True)
class Group:
    members: tuple[int, ...]
    """global ranks in group-rank order"""
    desc: str


@dataclass(frozen=True)
class Layout:
    stages: int
    replicas: int
    tp: int
    stage: dict[int, int]
    replica: dict[int, int]
    tp_pos: dict[int, int]
    source: str
    tp_groups: tuple[tuple[int, ...], ...] = ()

    def peers(self, ranks: list[int]) -> list[list[int]]:
        """`ranks` grouped into cohorts of peers (the same stage), in stage order."""
        by_stage: dict[int, list[int]] = defaultdict(list)
        for r in ranks:
            by_stage[self.stage.get(r, -1)].append(r)
        return [sorted(v) for _, v in sorted(by_stage.items())]

    def summary(self, ranks: int) -> str:
        parts = [f"{n} {word}" for n, word in ((self.stages, "stages"), (self.replicas, "replicas"),
                                                (self.tp, "TP ranks")) if n > 1]  # fmt: skip
        return f"{ranks} ranks = {' x '.join(parts) or '1 replica'}, from {self.source}"


def dimension_of(desc: str) -> str | None:
    """The one dimension a process group's description names, or None."""
    words = set(re.split(r"[^a-z0-9]+", desc.lower()))
    named = [dim for dim, vocab in WORDS.items() if words & vocab]
    return named[0] if len(named) == 1 else None


def _groups(ranks: list[RankReport], world: int, dumped: list[ProcessGroup]) -> tuple[list[Group], str]:
    """The job's groups smaller than the world (and larger than one), from the traces' pg_config, else the Flight
    Recorder's, else from collective labels."""
    for source, listed in (("process groups", [g for r in ranks for g in r.process_groups]),
                           ("the Flight Recorder's process groups", dumped)):  # fmt: skip
        seen: dict[tuple[int, ...], str] = {}
        for g in listed:
            if 1 < len(g.ranks) < world:
                seen.setdefault(tuple(g.ranks), g.desc)
        if seen:
            return [Group(m, d) for m, d in seen.items()], source
    members: dict[str, set[int]] = defaultdict(set)
    for r in ranks:
        for c in r.collectives:
            if c.process_group:
                members[c.process_group].add(r.rank)
    out: dict[tuple[int, ...], str] = {}
    for label, who in members.items():
        if 1 < len(who) < world:
            out.setdefault(tuple(sorted(who)), label.split(":", 1)[-1])
    return [Group(m, d) for m, d in out.items()], "collectives (who meets whom)"


def _families(groups: list[Group]) -> list[list[Group]]:
    """Unnamed groups by shape (size and strides), each family's groups disjoint; largest stride first."""
    shapes: dict[tuple[int, ...], list[Group]] = defaultdict(list)
    for g in groups:
        ordered = sorted(g.members)
        shapes[tuple(int(x) for x in np.diff(ordered))].append(g)
    out = []
    for _, family in sorted(shapes.items(), key=lambda kv: -(kv[0][0] if kv[0] else 0)):
        union = [m for g in family for m in g.members]
        if len(union) == len(set(union)):
            out.append(family)
    return out


Signature = tuple[tuple[str, int], ...]


def _signatures(ranks: list[RankReport]) -> dict[int, Signature]:
    """rank -> the collectives it issued other than sends and receives, with their counts."""
    return {
        r.rank: tuple(
            sorted((c.name, c.count) for c in r.collectives if not any(w in c.name.lower() for w in P2P_WORDS))
        )
        for r in ranks
    }


def _alike(family: list[Group], signatures: dict[int, Signature]) -> bool | None:
    """Whether every group of the family joins ranks that issue the same collectives (None: ranks unknown)."""
    if not all(m in signatures for g in family for m in g.members):
        return None
    return all(len({signatures[m] for m in g.members}) == 1 for g in family)


def _pipeline_first(families: list[list[Group]], signatures: dict[int, Signature]) -> list[list[Group]]:
    """The families, the pipeline's first: the one family whose groups join ranks of unlike collectives where
    another's join ranks of like ones (replicas run the same code); else as their strides order them."""
    alike = [_alike(f, signatures) for f in families]
    unlike = [i for i, a in enumerate(alike) if a is False]
    if len(unlike) != 1 or True not in alike:
        return families
    return [families[unlike[0]]] + [f for i, f in enumerate(families) if i != unlike[0]]


def _by_dimension(
    groups: list[Group], p2p: bool, signatures: dict[int, Signature] | None = None
) -> dict[str, list[Group]]:
    named: dict[str, list[Group]] = defaultdict(list)
    unnamed = []
    for g in groups:
        dim = dimension_of(g.desc)
        if dim is not None:
            named[dim].append(g)
        else:
            unnamed.append(g)
    if named:
        return named
    families = _families(unnamed)
    if p2p:
        families = _pipeline_first(families, signatures or {})
    order = ("pp", "dp", "tp") if p2p else ("dp", "tp")
    return dict(zip(order, families, strict=False))


def _positions(groups: list[Group]) -> dict[int, int]:
    """rank -> its position in its group (the largest group where a rank is in several)."""
    out: dict[int, tuple[int, int]] = {}
    for g in groups:
        for i, m in enumerate(g.members):
            if m not in out or len(g.members) > out[m][1]:
                out[m] = (i, len(g.members))
    return {m: pos for m, (pos, _) in out.items()}


def _exchanges_messages(ranks: list[RankReport]) -> bool:
    return any(any(w in c.name.lower() for w in P2P_WORDS) for r in ranks for c in r.collectives)


def job_layout(ranks: list[RankReport], dumped: list[ProcessGroup] | None = None) -> Layout | None:
    """The layout of the analysed ranks, or None for a job without pipeline stages or tensor parallelism (or whose
    traces say nothing of it); `dumped`: the process groups of the ranks' Flight Recorder dumps."""
    sizes = [r.world_size for r in ranks if r.world_size]
    world = max(sizes) if sizes else len(ranks)
    groups, source = _groups(ranks, world, dumped or [])
    if not groups:
        return None
    dims = _by_dimension(groups, _exchanges_messages(ranks), _signatures(ranks))
    if source == "process groups":
        named = any(dimension_of(g.desc) for g in groups)
        source = "process groups" if named else "process groups (unnamed; dimensions from their shape)"
    stage, replica, tp = (_positions(dims.get(d, [])) for d in ("pp", "dp", "tp"))
    n = {d: max((len(g.members) for g in dims.get(d, [])), default=1) for d in ("pp", "dp", "tp")}
    if n["pp"] < 2 and n["tp"] < 2:
        return None
    tp_groups = tuple(g.members for g in dims.get("tp", []))
    return Layout(n["pp"], n["dp"], n["tp"], stage, replica, tp, source, tp_groups)


def median_compute_us(r: RankReport) -> float:
    """The rank's median compute per step (forward + backward + optimizer)."""
    if r.step_phases:
        return float(np.median([p.forward + p.backward + p.optimizer for p in r.step_phases]))
    return r.compute_time / max(r.steps.count, 1)


def microbatches(layout: Layout, ranks: list[RankReport]) -> int | None:
    """Microbatches per step: the first stage's point-to-point sends per step (one activation per microbatch; where
    sends and receives share one kernel name, as NCCL's SendRecv kernels do, half of those). A GPU rank's
    collectives leave out its last recorded step, as HTA's breakdowns do (analyses.hta_filter)."""
    counts = []
    for r in ranks:
        covered = r.steps.count - 1 if r.device == "cuda" and r.steps.count > 1 else r.steps.count
        if layout.stage.get(r.rank) != 0 or covered <= 0:
            continue
        sends = []
        for c in r.collectives:
            name = c.name.lower()
            if "send" in name and not name.startswith("c10d::"):
                sends.append(c.count / (2 if "recv" in name else 1))
        if sends:
            counts.append(max(sends) / covered)
    return round(float(np.median(counts))) if counts else None


def layout_model(layout: Layout, ranks: list[RankReport]) -> ParallelLayout:
    """The layout as report.json shows it, with each rank's compute per step (the stage x replica grid)."""
    rows = [
        LayoutRank(
            rank=r.rank,
            stage=layout.stage.get(r.rank, 0),
            replica=layout.replica.get(r.rank, 0),
            tp=layout.tp_pos.get(r.rank, 0),
            compute_us=round(median_compute_us(r), 1),
        )
        for r in sorted(ranks, key=lambda x: x.rank)
    ]
    sizes = [r.world_size for r in ranks if r.world_size]
    return ParallelLayout(
        stages=layout.stages,
        replicas=layout.replicas,
        tp=layout.tp,
        source=layout.source,
        summary=layout.summary(max(sizes) if sizes else len(ranks)),
        microbatches=microbatches(layout, ranks),
        ranks=rows,
        by_stage=group_times("stage", layout.stage, ranks) if layout.stages > 1 else [],
        by_replica=group_times("replica", layout.replica, ranks) if layout.replicas > 1 else [],
    )


def _split(r: RankReport) -> tuple[float, float, float, float]:
    """(step, compute, waiting, host) of the rank's median step, each the median over its recorded steps."""
    phases = r.step_phases or ([r.phases] if r.phases is not None else [])
    if not phases:
        return 0.0, 0.0, 0.0, 0.0
    rows = np.array(
        [
            (
                p.data_loading + p.forward + p.backward + p.optimizer + p.communication_wait + p.other,
                p.forward + p.backward + p.optimizer,
                p.communication_wait,
                p.data_loading + p.other,
            )
            for p in phases
        ]
    )
    step, compute, waiting, host = np.median(rows, axis=0).tolist()
    return step, compute, waiting, host


def group_times(kind: str, of: dict[int, int], ranks: list[RankReport]) -> list[GroupTime]:
    """The step decomposed per group (`of`: rank -> its stage or replica), each group's compute against the
    median group's."""
    members: dict[int, list[RankReport]] = defaultdict(list)
    for r in ranks:
        members[of.get(r.rank, 0)].append(r)
    out = []
    for g in sorted(members):
        splits = np.array([_split(r) for r in members[g]])
        step, compute, waiting, host = np.median(splits, axis=0).tolist()
        out.append(
            GroupTime(
                group=f"{kind} {g}",
                ranks=sorted(r.rank for r in members[g]),
                step_us=round(step, 1),
                compute_us=round(compute, 1),
                waiting_us=round(waiting, 1),
                host_us=round(host, 1),
            )
        )
    middle = float(np.median([g.compute_us for g in out])) if out else 0.0
    return [g.model_copy(update={"compute_excess_us": round(max(g.compute_us - middle, 0.0), 1)}) for g in out]
