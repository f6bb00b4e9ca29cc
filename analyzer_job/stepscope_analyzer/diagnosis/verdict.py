"""The one verdict line and the next steps a person reads first. Pure."""

from __future__ import annotations

from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Bottleneck, Cause, Hang, SlowNode, SlowRank

_CAUSE_TEXT = {
    Cause.COMPUTE: "more compute per step than the other ranks",
    Cause.HOST: "host-side stalls before work starts (input pipeline, data loading, CPU)",
    Cause.COMMUNICATION: "slow collectives of its own",
    Cause.MEMORY: "more time in memory copies/sets",
    Cause.HANG: "it stopped reaching step boundaries (hang)",
}
_NEXT_STEP = {
    Cause.COMPUTE: "Compare the listed kernels/ops on rank {r} with another rank: different input shapes, a "
    "throttled or different device, or extra work on that rank.",
    Cause.HOST: "Look at rank {r}'s input pipeline and CPU: DataLoader workers, preprocessing, logging or "
    "checkpointing on that rank, CPU contention on its node.",
    Cause.COMMUNICATION: "Check rank {r}'s network path (NIC, links, NCCL/gloo settings) and its process groups.",
    Cause.MEMORY: "Look for host<->device copies or allocator churn on rank {r} (pinned memory, .item(), .cpu()).",
    Cause.HANG: "Read rank {r}'s stacks below: it is where the job is stuck; the other ranks wait for it.",
}


def verdict_line(
    slow: list[SlowRank],
    hangs: list[Hang],
    nodes: list[SlowNode],
    analysed: int,
    errored: int,
) -> str:
    if analysed == 0 and not hangs:
        return f"No rank could be analysed ({errored} with errors); see the per-rank errors."
    hang_culprits = [s for s in slow if s.cause is Cause.HANG]
    if hang_culprits:
        waiting = next((h.waiting_collective for h in hangs if h.waiting_collective), None)
        ranks = format_rank_set([s.rank for s in hang_culprits])
        where = f"; the others wait in {waiting}" if waiting else ""
        conf = hang_culprits[0].confidence
        return f"Hang: rank {ranks} stopped reaching step boundaries{where} (confidence {conf:.0%})."
    if slow:
        top = slow[0]
        where = f" on node {top.node}" if top.node else ""
        more = f" ({len(slow) - 1} more slow rank(s))" if len(slow) > 1 else ""
        node_text = f"; node {nodes[0].node} holds slow ranks {format_rank_set(nodes[0].ranks)}" if nodes else ""
        return (
            f"Rank {top.rank}{where} slows the job by ~{top.slowdown_pct:.0f}%: {_CAUSE_TEXT[top.cause]} "
            f"(cause {top.cause.value}, confidence {top.confidence:.0%}){more}{node_text}."
        )
    tail = f"; {errored} rank(s) could not be analysed" if errored else ""
    if analysed == 1:
        return f"One rank analysed: no other rank to compare it with{tail}."
    return f"No slow rank: the {analysed} analysed ranks are balanced{tail}."


def next_steps(slow: list[SlowRank], bottlenecks: list[Bottleneck], errored: int) -> list[str]:
    steps: list[str] = []
    seen: set[Cause] = set()
    for s in slow:
        if s.cause in seen:
            continue
        seen.add(s.cause)
        steps.append(_NEXT_STEP[s.cause].format(r=s.rank))
    if bottlenecks:
        b = bottlenecks[0]
        name = b.name if len(b.name) <= 120 else b.name[:117] + "..."
        steps.append(
            f"Top bottleneck across ranks: {name} ({b.category}, {b.bottleneck_ratio:.1%} of end-to-end time "
            "not overlapped by compute)."
        )
    if errored:
        steps.append(f"{errored} rank(s) could not be analysed; see the per-rank errors.")
    if not steps:
        steps.append("Nothing stands out; profile more steps or a larger share of ranks to compare.")
    return steps
