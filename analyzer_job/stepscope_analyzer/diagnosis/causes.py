"""The causes a slow rank can have, as one table that every stage of the diagnosis reads. Pure.

One row per cause: the rank cost it is measured by (and the step phases that make that cost), how that cost is
labelled in the evidence, which per-rank entries (function categories, HTA kernel class) name what differs, the
verdict's words and the next step to suggest. Adding a cause means adding a row here (and a test). The rows of a
pipeline job's shape (stage imbalance, bubble, data imbalance) are not a rank's cost: diagnosis.pipeline_findings
measures them, and their next step is the remedy.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_contract.report import Cause


@dataclass(frozen=True)
class CauseRow:
    cause: Cause
    cost: str
    """the per-step rank cost compared across ranks (diagnosis.rank_costs.COSTS), '' when not a cost"""
    phases: tuple[str, ...]
    """StepPhases keys whose time makes the cost"""
    label: str
    """how the cost reads in the evidence"""
    evidence_categories: frozenset[str]
    """Bottleneck categories of RankReport.top_functions that may name what differs"""
    kernel_type: str | None
    """HTA kernel class of RankReport.top_kernels that may name what differs"""
    wait_weight: float
    """how much of its excess the other ranks must be seen waiting for (times DiagnosisConfig.wait_share); host
    work that burns a shared CPU slows the others through contention rather than in collectives, so for host time
    it is enough that the others wait for the rank at all"""
    verdict: str
    """what the rank does, in the verdict line"""
    next_step: str
    """what to look at next; {r} is the rank"""
    takes_over: frozenset[str] = frozenset()
    """costs whose excess on a GPU rank is this cause instead when most of it is `device_time` (copies inside the
    input phase read as host time, inside the step's work as compute)"""
    device_time: str = ""
    """the RankReport time (over the window) that decides `takes_over`"""


CAUSES: tuple[CauseRow, ...] = (
    CauseRow(
        cause=Cause.COMPUTE,
        cost="compute",
        phases=("forward", "backward", "optimizer"),
        label="compute per step (forward + backward + optimizer)",
        evidence_categories=frozenset({"cpu_op", "kernel", "python", "user_annotation"}),
        kernel_type="COMPUTATION",
        wait_weight=1.0,
        verdict="more compute per step than the other ranks",
        next_step="Compare the listed kernels/ops on rank {r} with another rank: different input shapes or batch "
        "sizes, a throttled or different device, or extra work on that rank.",
    ),
    CauseRow(
        cause=Cause.HOST,
        cost="host",
        phases=("data_loading", "other"),
        label="host time per step outside forward/backward/optimizer (data_loading + other)",
        evidence_categories=frozenset({"python", "user_annotation", "host_gap", "runtime", "cpu_op"}),
        kernel_type=None,
        wait_weight=0.0,
        verdict="host-side work outside the model's steps (input pipeline, Python code, logging, GC, CPU)",
        next_step="Look at rank {r}'s host code around the listed places: DataLoader workers and collate_fn, Python "
        "preprocessing, logging or checkpointing on that rank, garbage collection, CPU contention on its node.",
    ),
    CauseRow(
        cause=Cause.MEMORY,
        cost="",
        phases=(),
        label="memory copies/sets per step",
        evidence_categories=frozenset({"memory"}),
        kernel_type="MEMORY",
        wait_weight=1.0,
        verdict="more time in memory copies/sets",
        takes_over=frozenset({"compute", "host"}),
        device_time="memory_time",
        next_step="Look for host<->device copies or allocator churn on rank {r} (pinned memory, .item(), .cpu()).",
    ),
    CauseRow(
        cause=Cause.COMMUNICATION,
        cost="communication",
        phases=("communication_wait",),
        label="own time in collectives per step (without waiting for other ranks)",
        evidence_categories=frozenset({"communication"}),
        kernel_type="COMMUNICATION",
        wait_weight=1.0,
        verdict="slow collectives of its own",
        next_step="Check rank {r}'s network path (NIC, links, NCCL/gloo settings) and its process groups.",
    ),
    CauseRow(
        cause=Cause.HANG,
        cost="",
        phases=(),
        label="seconds since the last step boundary",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="it stopped reaching step boundaries (hang)",
        next_step="Read rank {r}'s stacks below: it is where the job is stuck; the other ranks wait for it.",
    ),
    CauseRow(
        cause=Cause.STAGE_IMBALANCE,
        cost="",
        phases=(),
        label="a pipeline stage's compute per step against the other stages'",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="a pipeline stage holds more work than the others (layers badly split between stages)",
        next_step="Move layers from the heavy stage (rank {r}) to the others, so that every stage computes about "
        "the same per microbatch (count the embedding, the output layer and the loss on the first and last stage).",
    ),
    CauseRow(
        cause=Cause.PIPELINE_BUBBLE,
        cost="",
        phases=(),
        label="share of the step the stages idle in the schedule's warm-up and cool-down",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="the pipeline schedule leaves its stages idle in warm-up and cool-down",
        next_step="Give the pipeline (rank {r}) more microbatches per step (smaller microbatches, the same batch), or "
        "an interleaved schedule (virtual stages per rank: Interleaved1F1B, ScheduleInterleavedZeroBubble).",
    ),
    CauseRow(
        cause=Cause.DATA_IMBALANCE,
        cost="",
        phases=(),
        label="variation of compute per step with the inputs, no rank persistently slower",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="the inputs' sizes vary from microbatch to microbatch (sequence lengths), so replicas wait in turn",
        next_step="Even out the work per microbatch on rank {r}: bucket sequences by length, pack them to a fixed "
        "token count, or balance tokens rather than samples per batch (record input shapes to see the lengths).",
    ),
    CauseRow(
        cause=Cause.TP_STRAGGLER,
        cost="",
        phases=(),
        label="one rank of a tensor-parallel group computes more than its group-mates",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="one rank of a tensor-parallel group delays its group's collectives every layer",
        next_step="Rank {r} holds its whole tensor-parallel group back in every layer's collective: check its GPU "
        "(clocks, throttling, a different device) and its NVLink/PCIe links against its group-mates'.",
    ),
)

CAUSES += (
    CauseRow(
        cause=Cause.EXPERT_IMBALANCE,
        cost="",
        phases=(),
        label="all-to-all volume and compute per step skewed across an expert-parallel group",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="the ranks holding hot experts get more tokens and compute longer; the others wait in all-to-all",
        next_step="Even out the tokens per expert (ranks {r} receive the most): a tighter capacity factor (drop or "
        "reroute overflow tokens), an auxiliary load-balancing loss (or a larger coefficient), or a different "
        "expert placement (hot experts split or spread over ranks).",
    ),
    CauseRow(
        cause=Cause.DESYNC,
        cost="",
        phases=(),
        label="collective mismatch (Flight Recorder)",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="it called another collective than the other ranks at the same point (desync)",
        next_step="Rank {r} took a code path the other ranks did not: read the mismatch and its call site below "
        "(a condition on the rank, a data-dependent branch, a different model or process-group set-up); the job "
        "stands until the ranks issue the same collectives in the same order.",
    ),
)

CAUSES += (
    CauseRow(
        cause=Cause.GPU_THROTTLE,
        cost="",
        phases=(),
        label="a slow rank's GPU clocks and slowdown reasons against its peers' (NVML)",
        evidence_categories=frozenset(),
        kernel_type=None,
        wait_weight=0.0,
        verdict="its GPU runs throttled (below its peers' clocks, held down by heat or power)",
        next_step="Rank {r}'s GPU is throttled ({detail}): check the cooling, power and clocks of that GPU on {where} "
        "(nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE,POWER); its kernels, not its work, are slower.",
    ),
)

STANDSTILL = frozenset({Cause.HANG, Cause.DESYNC})
"""causes of a job that stands still: no step time to compare, the culprit named from stacks and dumps"""

_BY_CAUSE = {row.cause: row for row in CAUSES}
_BY_COST = {row.cost: row for row in CAUSES if row.cost}


def cause_row(cause: Cause) -> CauseRow:
    return _BY_CAUSE[cause]


def row_for_cost(cost: str) -> CauseRow:
    return _BY_COST[cost]
