"""Hangs: ranks that did not reach a step boundary, their stacks, and the collective the others wait in.

When one rank stops (a deadlock, an endless loop, a stuck data loader), every other rank blocks inside the
next collective and their watchdogs fire too. The culprit is then the hung rank whose stacks are NOT inside a
collective; the collective that shows in the others' stacks is the one they wait in. Pure.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass

from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Cause, Evidence, Hang, SlowRank
from stepscope_contract.wire import HookPhase, HookState, RankMeta

COLLECTIVES = (
    "all_reduce",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_gather",
    "reduce_scatter_tensor",
    "reduce_scatter",
    "all_to_all_single",
    "all_to_all",
    "broadcast_object_list",
    "broadcast",
    "barrier",
    "monitored_barrier",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "isend",
    "irecv",
)
# `File "...", line 12, in all_reduce` (traceback) or `File "...", line 12 in all_reduce` (faulthandler)
_FRAME = re.compile(r"line \d+,? in (?P<fn>[A-Za-z_][A-Za-z0-9_]*)")
_COLLECTIVE_SET = frozenset(COLLECTIVES)
MAX_STACKS_CHARS = 20_000


@dataclass(frozen=True)
class HangEvidence:
    """What storage says about a rank that may be hung (from its RankMeta, HookState and stacks.txt)."""

    rank: int
    hung: bool
    node: str | None = None
    last_step: int | None = None
    seconds_since_last_step: float | None = None
    stacks: str = ""

    @classmethod
    def from_meta(cls, meta: RankMeta, stacks: str = "") -> HangEvidence:
        return cls(
            rank=meta.rank,
            hung=meta.hung,
            node=meta.node,
            last_step=meta.steps_captured,
            seconds_since_last_step=meta.seconds_since_last_step,
            stacks=stacks,
        )

    @classmethod
    def from_state(cls, state: HookState, stacks: str = "", now: float | None = None) -> HangEvidence:
        since = None
        if state.last_step_time is not None:
            since = max(0.0, (time.time() if now is None else now) - state.last_step_time)
        return cls(
            rank=state.rank,
            hung=state.phase is HookPhase.HUNG,
            last_step=state.step,
            seconds_since_last_step=since,
            stacks=stacks,
        )


def collective_in_stacks(stacks: str) -> str | None:
    """The torch.distributed collective a stack dump is blocked in, if any (most frequent frame name)."""
    found = Counter(m.group("fn") for m in _FRAME.finditer(stacks) if m.group("fn") in _COLLECTIVE_SET)
    if not found:
        return None
    return found.most_common(1)[0][0]


def find_hangs(evidence: list[HangEvidence]) -> tuple[list[Hang], list[SlowRank]]:
    """Hang entries for every hung rank, and the culprit ranks as slow ranks with cause `hang`."""
    hung = sorted((e for e in evidence if e.hung), key=lambda e: e.rank)
    if not hung:
        return [], []
    waiting_in = {e.rank: collective_in_stacks(e.stacks) for e in hung}
    votes = Counter(c for c in waiting_in.values() if c is not None)
    waited_collective = votes.most_common(1)[0][0] if votes else None
    culprits = [e for e in hung if waiting_in[e.rank] is None]
    waiting_ranks = [e.rank for e in hung if waiting_in[e.rank] is not None]

    hangs = [
        Hang(
            rank=e.rank,
            last_step=e.last_step,
            seconds_since_last_step=e.seconds_since_last_step,
            stacks=e.stacks[:MAX_STACKS_CHARS],
            waiting_collective=waited_collective if waiting_in[e.rank] is None else waiting_in[e.rank],
        )
        for e in hung
    ]
    slow: list[SlowRank] = []
    if culprits:
        for e in culprits:
            has_stacks = bool(e.stacks.strip())
            confidence = 0.9 if (waiting_ranks and has_stacks) else (0.7 if waiting_ranks else 0.6)
            detail = (
                f"ranks {format_rank_set(waiting_ranks)} wait in {waited_collective}; this rank is not in a collective"
                if waiting_ranks
                else "no step boundary within the step timeout"
            )
            slow.append(_hang_rank(e, confidence, detail))
    else:
        # every hung rank waits in a collective: a peer was lost, or ranks called different collectives
        for e in hung:
            slow.append(_hang_rank(e, 0.4, f"blocked in {waiting_in[e.rank]}; no hung rank outside a collective"))
    return hangs, slow


def _hang_rank(e: HangEvidence, confidence: float, detail: str) -> SlowRank:
    since = e.seconds_since_last_step or 0.0
    return SlowRank(
        rank=e.rank,
        cause=Cause.HANG,
        confidence=confidence,
        slowdown_pct=0.0,
        node=e.node,
        evidence=[Evidence(metric="seconds_since_last_step", value=since, baseline=0.0, unit="s", detail=detail)],
    )
