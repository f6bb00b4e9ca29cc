"""diff.json: the regression gate's output, `stepscope diff BASELINE CANDIDATE` (and a session's baseline).

Times are µs. A "step" is one training step of the job; per-step figures are means over the analysed ranks'
recorded steps (sum over ranks / steps over ranks), or one rank's where a change sits on that rank. `regression_pct`
is how much slower the candidate's steps are than the baseline's (negative: faster), with a confidence interval over
both sides' step-to-step noise; with `at_equal_op_speed` (the default on CPU ranks when enough ops are unchanged) it
is the slowdown left after the machine's speed (the per-call change of the ops the candidate did not change) is
taken out; `step_regression_pct` is always the measured, wall-clock one. `added_work` is the self time of what the
candidate added, with its interval. The rule (README "Comparing with a baseline", docs/ci.md): regressed when the
steps' interval's lower end or the added work's interval's lower end is above `max_regression_pct`.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

from stepscope_contract.empty import new_list
from stepscope_contract.report import SessionInfo

DIFF_SCHEMA_VERSION: Final = 1


class DiffModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DiffVerdict(StrEnum):
    PASSED = "passed"  # not shown to be slower than the gate allows
    REGRESSED = "regressed"  # slower by more than max_regression_pct, with confidence (the interval's lower bound)
    IMPROVED = "improved"  # the baseline is slower by more than max_regression_pct, with confidence: passes too
    UNUSABLE = "unusable"  # a side has too few steps to decide; see reason


class ChangeKind(StrEnum):
    """HTA TraceDiff's classes of a name between two traces."""

    ADDED = "added"  # only in the candidate
    REMOVED = "removed"  # only in the baseline
    CHANGED = "changed"  # in both (its time or count per step moved)


class SideSummary(DiffModel):
    """One side of the comparison."""

    source: str = Field(default="", description="what was given on the command line (folder, URI, report.json)")
    session: SessionInfo = Field(default_factory=SessionInfo)
    generated_at: datetime | None = Field(default=None, description="when its report was made")
    world_size: int | None = None
    ranks: int = Field(default=0, description="ranks in its report")
    ranks_analysed: int = Field(default=0, description="ranks with recorded steps, the ones compared")
    steps: int = Field(default=0, description="job steps in the statistic (per-step medians over the ranks)")
    median_step_us: float = Field(default=0.0, description="the report's median step time (ranks and steps)")
    p90_step_us: float = 0.0


class TopChange(DiffModel):
    """A kernel, op, region or function whose time or call count per step differs between the sides."""

    name: str = Field(description="the name with per-process details (addresses, ids, temporary folders) replaced")
    kind: str = Field(description="kernel | communication | memory | runtime | python | cpu_op | user_annotation")
    change: ChangeKind
    basis: str = Field(
        default="self",
        description="self: the figures are self (exclusive) time, what the name itself ran; inclusive: a new "
        "Python frame or annotated region, or a removed one, whose whole time is the change (a call site that came or "
        "went); communication: the "
        "transfer time (total less waiting for the last rank)",
    )
    rank: int | None = Field(
        default=None,
        description="the rank the change sits on when it sits on some ranks only (the figures are that rank's); "
        "null: job-wide, µs per step per rank",
    )
    baseline_us_per_step: float
    candidate_us_per_step: float
    delta_us_per_step: float = Field(description="candidate - baseline, measured")
    at_equal_op_speed_delta_us_per_step: float = Field(
        default=0.0,
        description="candidate at the baseline's op speed (divided by the unchanged ops' per-call ratio when the "
        "gate compares at equal op speed) - baseline: what the changes are ranked by",
    )
    inclusive_delta_us_per_step: float = Field(default=0.0, description="the same in inclusive time (HTA TraceDiff)")
    wait_delta_us_per_step: float = Field(
        default=0.0,
        description="communication: the change of the time waiting for other ranks inside it; a consequence of the "
        "rank or op that arrived late, never ranked",
    )
    baseline_count_per_step: float = 0.0
    candidate_count_per_step: float = 0.0
    count_delta: float = Field(description="calls per step, candidate - baseline")


class AddedWork(DiffModel):
    """What the candidate runs that the baseline does not: the self time per step of the ops, kernels, regions and
    frames it added, and of the extra calls of those it calls more often, on the rank with the most."""

    us_per_step: float = Field(description="µs per step (self time)")
    rank: int | None = Field(default=None, description="the rank with the most added work")
    pct: float = Field(
        description="in % of the rest of the candidate's median job step (the step less the added work, from the "
        "same recording, so the machine's speed cancels): how much slower the step is for it"
    )
    ci_low_pct: float | None = Field(
        default=None,
        description="lower end of its interval, against the longest end of the candidate median step's interval "
        "(the decision is taken on it)",
    )
    ci_high_pct: float | None = None
    names: list[str] = Field(
        default_factory=new_list, description="the largest contributors, largest first (at most 5)"
    )


class PhaseDelta(DiffModel):
    """One phase of a step (StepPhases' fields), mean µs per step on each side."""

    phase: str
    baseline_us: float
    candidate_us: float
    delta_us: float


class RankDelta(DiffModel):
    rank: Annotated[int, Field(ge=0)]
    baseline_status: str = Field(default="absent", description="the rank's status in the baseline, or 'absent'")
    candidate_status: str = "absent"
    baseline_median_us: float | None = None
    candidate_median_us: float | None = None
    delta_pct: float | None = Field(default=None, description="candidate median / baseline median - 1, in %")
    phases: list[PhaseDelta] = Field(default_factory=new_list)


class DiffResult(DiffModel):
    schema_version: int = DIFF_SCHEMA_VERSION
    tool_version: str = ""
    generated_at: datetime
    verdict: DiffVerdict
    reason: str = Field(description="one line a person reads first")
    max_regression_pct: float = Field(description="the gate: slower by more than this, with confidence, fails")
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        description="two-sided level of the interval; its lower bound is a one-sided (1 + confidence) / 2 bound"
    )
    regression_pct: float | None = Field(
        default=None,
        description="Hodges-Lehmann estimate: how much slower the candidate's steps are, in %; at equal op speed "
        "when at_equal_op_speed (the decision is taken on it and its interval)",
    )
    regression_ci_low_pct: float | None = Field(default=None, description="lower end of the interval, in %")
    regression_ci_high_pct: float | None = Field(default=None, description="upper end of the interval, in %")
    at_equal_op_speed: bool = Field(
        default=False,
        description="regression_pct is the steps' slowdown less the unchanged ops' per-call one (the machine's "
        "speed between the recordings); false: the measured steps (--wall-clock, GPU ranks, or too few unchanged ops)",
    )
    step_regression_pct: float | None = Field(
        default=None, description="the measured (wall-clock) steps' slowdown, in %, Hodges-Lehmann estimate"
    )
    added_work: AddedWork | None = Field(
        default=None, description="the added work's evidence; null when the candidate added none"
    )
    decided_by: list[str] = Field(
        default_factory=new_list,
        description="what cleared the gate: 'steps' (regression_ci_low_pct above it, or for an improvement "
        "regression_ci_high_pct below its mirror) and/or 'added_work' (added_work.ci_low_pct above it)",
    )
    step_regression_ci_low_pct: float | None = Field(default=None, description="its interval's lower end, in %")
    step_regression_ci_high_pct: float | None = Field(default=None, description="its interval's upper end, in %")
    method: str = Field(default="", description="the statistic, in words")
    baseline: SideSummary
    candidate: SideSummary
    top_changes: list[TopChange] = Field(
        default_factory=new_list,
        description="ranked by at_equal_op_speed_delta_us_per_step, the figure every output shows: the largest "
        "increase first (the largest decrease first when the verdict is improved); a pass or an improvement leaves "
        "out the names whose change is smaller than the steps' noise (half the width of their interval; a note "
        "says how many)",
    )
    changes_total: int = Field(default=0, description="names listed (beyond the noise), before top_changes was cut")
    phases: list[PhaseDelta] = Field(default_factory=new_list, description="job-wide, when both reports carry phases")
    ranks: list[RankDelta] = Field(default_factory=new_list)
    unchanged_ops_speed_pct: float | None = Field(
        default=None,
        description="how much slower (+) or faster (-) per call, in %, the ops (kernels, where the ranks list GPU "
        "kernels) with the same calls per step on both sides ran in the candidate (weighted median, no op above "
        "10% of the weight); the whole machine's speed moves them all alike, a code change only those it touches "
        "(taken out of the steps on CPU ranks only). Null when too few ops are unchanged",
    )
    unchanged_ops_speed_ci_low_pct: float | None = Field(default=None, description="its interval's lower end, in %")
    unchanged_ops_speed_ci_high_pct: float | None = Field(default=None, description="its interval's upper end, in %")
    unchanged_ops: int = Field(default=0, description="how many ops (or kernels) that figure is over")
    notes: list[str] = Field(default_factory=new_list, description="what limits the comparison")
