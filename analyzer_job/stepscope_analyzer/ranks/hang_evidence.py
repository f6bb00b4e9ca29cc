"""What storage says about a rank that may be hung, as the map step reads it and the diagnosis weighs it.

Kept apart from diagnosis.hangs (which needs the Flight Recorder analysis and the report models) so that reading
ranks does not import the diagnosis: `stepscope analyze` hands its first ranks to the workers before it imports the
reduce step (pipeline)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from stepscope_contract.wire import HookPhase, HookState, RankMeta


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


__all__ = ["HangEvidence"]
