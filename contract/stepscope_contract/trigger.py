"""The ProfileTrigger custom resource: spec and status models (the CRD is generated from these).

A trigger watches the step telemetry of a training job's pods (the sidecars' `GET /v1/steps`) and creates a
ProfileSession from its template when a condition holds -- the job's step time regressed against its own rolling
baseline, one rank straggles behind the others, or no step came for a while -- or when its cron schedule is due.
Cooldown, one active session at a time, a daily cap and history limits (as a CronJob's) bound what it creates.
"""

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from stepscope_contract.empty import new_list
from stepscope_contract.session import (
    LABEL_VALUE,
    AnalysisSpec,
    CamelModel,
    CaptureSpec,
    ObjectMeta,
    StorageSpec,
    TargetSpec,
)

MAX_FIRED_SESSIONS = 64
"""Sessions the status remembers (newest first); the daily cap counts those of the last 24 hours."""

CRON_FIELD = r"(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?(,(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?)*"
CRON_PATTERN = rf"^{CRON_FIELD}( +{CRON_FIELD}){{4}}$"
"""Five cron fields (minute hour day-of-month month day-of-week): numbers, ranges, lists, steps and `*`."""
CRON_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


# ----------------------------------------------------------------------------------------------- spec


class TriggerCondition(StrEnum):
    """What made (or would make) a trigger fire."""

    NONE = "None"
    STEP_TIME_REGRESSION = "StepTimeRegression"
    STRAGGLER = "Straggler"
    STALL = "Stall"
    SCHEDULE = "Schedule"


class StragglerMeasure(StrEnum):
    OWN_TIME = "ownTime"  # the step's time outside backward(): a synchronous job's straggler shows only here
    STEP_TIME = "stepTime"  # the whole step: for jobs whose ranks do not wait for each other every step


FOR_SECONDS_DESCRIPTION = (
    "how long the condition must keep holding, evaluation after evaluation, before it fires (a Prometheus alert's "
    "`for`): seconds of contention from a neighbour never do"
)


class StepTimeRegression(CamelModel):
    """The job's median step time over its last `steps` steps exceeds its own rolling baseline (the `baselineSteps`
    before them) by more than `thresholdPercent`, in at least three quarters of those steps, for `forSeconds`."""

    threshold_percent: Annotated[float, Field(ge=1.0, le=1000.0)] = Field(
        default=30.0, description="how much slower than the baseline the recent steps must be"
    )
    steps: Annotated[int, Field(ge=5, le=1000)] = Field(default=20, description="the recent steps judged")
    baseline_steps: Annotated[int, Field(ge=10, le=1000)] = Field(
        default=200, description="the steps before them that make the rolling baseline"
    )
    for_seconds: Annotated[int, Field(ge=0, le=86_400)] = Field(default=60, description=FOR_SECONDS_DESCRIPTION)


class Straggler(CamelModel):
    """One rank's median step time or own time over its last `steps` steps exceeds the median of the other ranks'
    by more than `thresholdPercent`, in at least three quarters of those steps, for `forSeconds`."""

    threshold_percent: Annotated[float, Field(ge=5.0, le=1000.0)] = Field(
        default=50.0, description="how much slower than the median of the other ranks the rank must be"
    )
    steps: Annotated[int, Field(ge=5, le=1000)] = Field(default=20, description="each rank's recent steps judged")
    measure: StragglerMeasure = Field(
        default=StragglerMeasure.OWN_TIME,
        description="ownTime: the step outside backward(), where synchronous ranks wait for the slowest; stepTime",
    )
    for_seconds: Annotated[int, Field(ge=0, le=86_400)] = Field(default=30, description=FOR_SECONDS_DESCRIPTION)


class Stall(CamelModel):
    """No step boundary on a rank for `seconds` (a hang, a dead input pipeline, a stuck collective)."""

    seconds: Annotated[int, Field(ge=5, le=86_400)] = Field(default=300, description="seconds without a step")


class TriggerConditions(CamelModel):
    """What makes the trigger fire; each is optional."""

    step_time_regression: StepTimeRegression | None = Field(
        default=None, description="the job got slower than its own recent past"
    )
    straggler: Straggler | None = Field(default=None, description="one rank is slower than the others")
    stall: Stall | None = Field(default=None, description="no step for a while")

    def any(self) -> bool:
        return self.step_time_regression is not None or self.straggler is not None or self.stall is not None

    def for_seconds(self, condition: TriggerCondition) -> int:
        """How long `condition` must hold before it fires (a stall's own seconds are its persistence)."""
        if condition is TriggerCondition.STRAGGLER and self.straggler is not None:
            return self.straggler.for_seconds
        if condition is TriggerCondition.STEP_TIME_REGRESSION and self.step_time_regression is not None:
            return self.step_time_regression.for_seconds
        return 0


class SessionTemplateMeta(CamelModel):
    """Labels and annotations of the sessions the trigger creates (the trigger adds its own)."""

    labels: Annotated[dict[str, LABEL_VALUE], Field(max_length=32)] | None = None
    annotations: Annotated[dict[str, Annotated[str, Field(max_length=4096)]], Field(max_length=32)] | None = None


class SessionTemplateSpec(CamelModel):
    """A ProfileSession spec without targets: the trigger's own spec.targets are the session's."""

    targets: TargetSpec | None = Field(
        default=None, description="must stay unset: the sessions profile the trigger's spec.targets"
    )
    capture: CaptureSpec = Field(default_factory=CaptureSpec, description="what to record on each target")
    storage: StorageSpec = Field(description="where traces and the report go (the install's settings fill the rest)")
    analysis: AnalysisSpec = Field(default_factory=AnalysisSpec, description="the cross-rank analysis")
    ttl_seconds_after_finished: Annotated[int, Field(ge=0, le=604_800)] = Field(
        default=3600, description="the analyzer Job is removed this long after it finishes"
    )

    @model_validator(mode="after")
    def _no_targets(self) -> "SessionTemplateSpec":
        if self.targets is not None:
            raise ValueError("sessionTemplate.spec.targets must not be set: the sessions profile spec.targets")
        return self


class SessionTemplate(CamelModel):
    """The ProfileSession each firing creates (like a CronJob's jobTemplate)."""

    metadata: SessionTemplateMeta | None = None
    spec: SessionTemplateSpec


class ProfileTriggerSpec(CamelModel):
    """Watches a job's step telemetry and creates a ProfileSession when a condition holds or a schedule is due."""

    targets: TargetSpec = Field(description="the pods watched and profiled: exactly one of selector or jobRef")
    conditions: TriggerConditions = Field(
        default_factory=TriggerConditions, description="step-time regression, straggler, stall"
    )
    schedule: Annotated[str, Field(max_length=128, pattern=CRON_PATTERN)] | None = Field(
        default=None, description='cron schedule in UTC ("0 3 * * *"): a session at each time, conditions or not'
    )
    session_template: SessionTemplate = Field(description="the ProfileSession each firing creates")
    evaluation_interval_seconds: Annotated[int, Field(ge=1, le=3600)] = Field(
        default=30, description="how often the sidecars' telemetry is pulled and the conditions evaluated"
    )
    cooldown_seconds: Annotated[int, Field(ge=0, le=604_800)] = Field(
        default=1800, description="after a firing, conditions fire no session for this long"
    )
    max_sessions_per_day: Annotated[int, Field(ge=1, le=MAX_FIRED_SESSIONS)] = Field(
        default=10, description="at most this many sessions in any 24 hours"
    )
    successful_sessions_history_limit: Annotated[int, Field(ge=0, le=32)] = Field(
        default=3, description="finished sessions with a report that are kept (older ones are deleted)"
    )
    failed_sessions_history_limit: Annotated[int, Field(ge=0, le=32)] = Field(
        default=1, description="failed sessions that are kept (older ones are deleted)"
    )
    suspend: bool = Field(default=False, description="evaluate and report, but create no session")

    @model_validator(mode="after")
    def _something_to_do(self) -> "ProfileTriggerSpec":
        if not self.conditions.any() and self.schedule is None:
            raise ValueError(
                "set at least one of conditions.stepTimeRegression, conditions.straggler, conditions.stall or schedule"
            )
        return self

    @field_validator("schedule")
    @classmethod
    def _cron_in_range(cls, value: str | None) -> str | None:
        if value is not None:
            check_cron_ranges(value)
        return value


def check_cron_ranges(expression: str) -> None:
    """ValueError naming the first number outside its field's range (the pattern checked the syntax)."""
    names = ("minute", "hour", "day of month", "month", "day of week")
    for name, text, (low, high) in zip(names, expression.split(), CRON_BOUNDS, strict=True):
        for number in re.findall(r"(?<![/0-9])[0-9]+", text):
            if not low <= int(number) <= high:
                raise ValueError(f"schedule: {name} {number} is outside {low}-{high}")


# --------------------------------------------------------------------------------------------- status


class TriggerStatusConditionType(StrEnum):
    ACCEPTED = "Accepted"  # the spec is valid
    TELEMETRY_AVAILABLE = "TelemetryAvailable"  # the target pods' sidecars answered with step telemetry


class TriggerStatusCondition(CamelModel):
    """Kubernetes condition conventions (metav1.Condition)."""

    type: TriggerStatusConditionType
    status: Literal["True", "False", "Unknown"]
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")]
    message: Annotated[str, Field(max_length=32_768)] = ""
    last_transition_time: datetime
    observed_generation: Annotated[int, Field(ge=0)] | None = None


class FiredSession(CamelModel):
    """A session the trigger created: when, for which condition, why, and its phase at the last evaluation."""

    name: Annotated[str, Field(max_length=253)]
    created_at: datetime
    condition: TriggerCondition
    reason: Annotated[str, Field(max_length=1024)] = ""
    phase: Annotated[str, Field(max_length=32)] | None = None


class TelemetryObservation(CamelModel):
    """What the last evaluation saw, for `kubectl describe`."""

    pods: Annotated[int, Field(ge=0)] = 0
    pods_answered: Annotated[int, Field(ge=0)] = 0
    ranks: Annotated[int, Field(ge=0)] = 0
    median_step_ms: float | None = None
    steps_per_second: float | None = None
    max_seconds_since_last_step: float | None = None


class ProfileTriggerStatus(CamelModel):
    """What the operator knows about a trigger; it keeps no other state."""

    model_config = ConfigDict(
        defer_build=True, alias_generator=to_camel, populate_by_name=True, extra="ignore", use_enum_values=False
    )

    observed_generation: Annotated[int, Field(ge=0)] | None = None
    condition: TriggerCondition = Field(
        default=TriggerCondition.NONE, description="the condition that held at the last evaluation"
    )
    condition_since: datetime | None = Field(default=None, description="when the current episode began")
    episode_fired: bool = Field(default=False, description="the current episode already created a session")
    message: Annotated[str, Field(max_length=4096)] = Field(
        default="", description="what the last evaluation found, and why it fired or did not"
    )
    last_evaluation_time: datetime | None = None
    last_fired_time: datetime | None = None
    last_fired_condition: TriggerCondition | None = None
    last_fired_reason: Annotated[str, Field(max_length=1024)] | None = Field(
        default=None, description="why the trigger last fired"
    )
    last_schedule_time: datetime | None = None
    active_session: Annotated[str, Field(max_length=253)] | None = None
    session_count: Annotated[int, Field(ge=0)] = Field(default=0, description="sessions created, ever")
    sessions: Annotated[list[FiredSession], Field(max_length=MAX_FIRED_SESSIONS)] = Field(
        default_factory=new_list, description="the sessions it created, newest first"
    )
    observed: TelemetryObservation | None = None
    conditions: Annotated[list[TriggerStatusCondition], Field(max_length=8)] = Field(default_factory=new_list)


class ProfileTrigger(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore", populate_by_name=True)

    api_version: str = Field(default="stepscope.dev/v1alpha1", alias="apiVersion")
    kind: Literal["ProfileTrigger"] = "ProfileTrigger"
    metadata: ObjectMeta
    spec: ProfileTriggerSpec
    status: ProfileTriggerStatus = Field(default_factory=ProfileTriggerStatus)
