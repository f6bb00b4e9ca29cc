"""The ProfileSession custom resource: spec and status models (the CRD is generated from these)."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from stepscope_contract.empty import new_dict, new_list
from stepscope_contract.ranks import RANK_SET_PATTERN, parse_rank_set
from stepscope_contract.storage import AddressingStyle

MAX_PROGRESS = 32
"""characters of status.progress, the Captured printer column"""
MAX_TARGET_STATUSES = 256
"""At most this many per-target entries are kept in status; the counts always cover every target."""

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$"


class CamelModel(BaseModel):
    """Models whose wire form is camelCase, as Kubernetes objects are.

    These models (the session's, the wire's, the trigger's) build their validators on first use (defer_build): a
    process pays only for the ones it validates. `stepscope analyze` on a folder of traces validates none of them,
    and building them all at import would cost CPU before it could hand its first rank to the workers
    (`STEPSCOPE_PHASES=1 stepscope analyze` prints the command's phases)."""

    model_config = ConfigDict(
        defer_build=True, alias_generator=to_camel, populate_by_name=True, extra="forbid", use_enum_values=False
    )

    def wire(self) -> dict[str, Any]:
        """The JSON-ready camelCase form, without unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# ----------------------------------------------------------------------------------------------- spec


class JobKind(StrEnum):
    PYTORCH_JOB = "PyTorchJob"
    JOB_SET = "JobSet"
    JOB = "Job"
    TRAIN_JOB = "TrainJob"  # Kubeflow Trainer v2 (trainer.kubeflow.org), which runs its nodes through a JobSet


class Activity(StrEnum):
    CPU = "cpu"
    CUDA = "cuda"


LABEL_VALUE = Annotated[str, Field(max_length=63)]


class LabelSelectorRequirement(CamelModel):
    key: Annotated[str, Field(min_length=1, max_length=317)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: Annotated[list[LABEL_VALUE], Field(max_length=64)] = Field(default_factory=new_list)

    @model_validator(mode="after")
    def _values_match_operator(self) -> "LabelSelectorRequirement":
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(CamelModel):
    """A Kubernetes label selector (matchLabels and matchExpressions are ANDed)."""

    match_labels: Annotated[dict[str, LABEL_VALUE], Field(max_length=64)] | None = None
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=32)] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> "LabelSelector":
        if not self.match_labels and not self.match_expressions:
            raise ValueError("selector needs matchLabels or matchExpressions (an empty selector matches every pod)")
        return self


class JobRef(CamelModel):
    """A job in the session's namespace whose pods are the targets."""

    kind: JobKind = Field(description="PyTorchJob (Kubeflow), TrainJob (Kubeflow Trainer v2), JobSet or batch Job")
    name: Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]


class TargetSpec(CamelModel):
    """Which training pods to profile: exactly one of selector or jobRef."""

    selector: LabelSelector | None = Field(default=None, description="pods in the session's namespace")
    job_ref: JobRef | None = Field(default=None, description="pods of this job in the session's namespace")
    ranks: Annotated[str, Field(max_length=1024, pattern=RANK_SET_PATTERN)] | None = Field(
        default=None, description='rank subset such as "0-7,12"; all ranks when absent'
    )
    container: Annotated[str, Field(max_length=63, pattern=DNS_LABEL)] | None = Field(
        default=None, description="training container (for its RANK env); the first container when absent"
    )
    max_targets: Annotated[int, Field(ge=1, le=16_384)] = Field(
        default=256, description="at most this many pods are profiled (lowest ranks first)"
    )
    wait_seconds: Annotated[int, Field(ge=0, le=86_400)] = Field(
        default=120,
        description="how long to wait for matching pods to exist and be Ready before the session fails",
    )

    @model_validator(mode="after")
    def _exactly_one_source(self) -> "TargetSpec":
        if self.selector is not None and self.job_ref is not None:
            raise ValueError("set targets.selector or targets.jobRef, not both")
        if self.selector is None and self.job_ref is None:
            raise ValueError("set one of targets.selector or targets.jobRef")
        return self

    @field_validator("ranks")
    @classmethod
    def _ranks_parse(cls, value: str | None) -> str | None:
        if value is not None:
            parse_rank_set(value)
        return value

    def rank_set(self) -> frozenset[int] | None:
        return None if self.ranks is None else parse_rank_set(self.ranks)


class GpuMetricsSpec(CamelModel):
    """NVML sampling (utilisation, clocks, power, memory) on pods with a GPU during the recorded window."""

    enabled: bool = True
    interval_ms: Annotated[int, Field(ge=10, le=10_000)] = Field(
        default=100, description="NVML sampling period; 100 ms is 10 Hz"
    )


class CaptureSpec(CamelModel):
    """What torch.profiler records on every target: how many steps, after how many, and what."""

    steps: Annotated[int, Field(ge=1, le=1000)] = Field(default=5, description="training steps to record")
    skip_steps: Annotated[int, Field(ge=0, le=100_000)] = Field(
        default=1, description="steps to let pass after the request before recording (warm-up)"
    )
    activities: Annotated[list[Activity], Field(min_length=1, max_length=2)] = Field(
        default_factory=lambda: [Activity.CPU, Activity.CUDA],
        description="torch.profiler activities; cuda is skipped on pods without a GPU",
    )
    record_shapes: bool = Field(default=False, description="record operator input shapes (larger traces)")
    with_stack: bool = Field(default=False, description="record Python stacks of operators (much larger traces)")
    profile_memory: bool = Field(default=False, description="record tensor allocations and frees")
    python_sampling: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=100,
        description="samples per second of the training thread's Python stack while the steps are recorded "
        "(folded stacks beside the trace; the host finding names the lines behind it); 0: off",
    )
    gpu_metrics: GpuMetricsSpec = Field(default_factory=GpuMetricsSpec, description="NVML sampling on GPU pods")
    timeout_seconds: Annotated[int, Field(ge=10, le=86_400)] = Field(
        default=600, description="deadline for the whole capture, from the start request to the last upload"
    )
    step_timeout_seconds: Annotated[int, Field(ge=1, le=3_600)] = Field(
        default=120, description="no step boundary for this long while a capture is pending or running: hang"
    )

    @field_validator("activities")
    @classmethod
    def _unique_activities(cls, value: list[Activity]) -> list[Activity]:
        if len(set(value)) != len(value):
            raise ValueError("activities must not repeat")
        return value


class SecretRef(CamelModel):
    """Storage credentials come only from a Kubernetes Secret in the session's namespace."""

    name: Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]
    access_key_id_key: Annotated[str, Field(min_length=1, max_length=253)] = "AWS_ACCESS_KEY_ID"
    secret_access_key_key: Annotated[str, Field(min_length=1, max_length=253)] = "AWS_SECRET_ACCESS_KEY"  # noqa: S105


STORAGE_URI_PATTERN = (
    r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?|oss://[a-z0-9][a-z0-9-]{1,61}[a-z0-9](/.*)?|file:///.*)$"
)


URL_BASE_PATTERN = r"^https://[^\s?#]+$"


class StorageSpec(CamelModel):
    """Where traces and the report go; what is left out comes from the operator's storage settings."""

    uri: Annotated[str, Field(max_length=1024, pattern=STORAGE_URI_PATTERN)] = Field(
        description="s3://bucket/prefix, oss://bucket/prefix or file:///path"
    )
    endpoint: Annotated[str, Field(max_length=512, pattern=r"^https?://[^\s]+$")] | None = Field(
        default=None,
        description="S3-compatible endpoint (MinIO, OSS); absent: the operator's storage settings, else AWS",
    )
    region: Annotated[str, Field(max_length=64, pattern=r"^[a-z0-9-]+$")] | None = Field(
        default=None, description="object store region (for oss://, the endpoint is derived from it)"
    )
    addressing_style: AddressingStyle = Field(
        default=AddressingStyle.AUTO, description="path (MinIO), virtual (OSS) or auto"
    )
    credentials_secret: SecretRef | None = Field(
        default=None,
        description="Secret with the access keys; absent: the operator's storage settings, else the pod's identity",
    )
    url_base: Annotated[str, Field(max_length=1024, pattern=URL_BASE_PATTERN)] | None = Field(
        default=None,
        description="an https:// URL that serves the objects under storage.uri (a bucket website, a CDN, a proxy "
        "that signs people in): the links of diff.md, diff-junit.xml and the report's comparison open under it "
        "(<urlBase>/<namespace>/<session>-<uid8>/report/diff.html); absent: the operator's storage settings, else "
        "the storage URIs themselves",
    )
    keep_raw_traces: bool = Field(default=True, description="keep rank traces after the report is written")
    delete_on_session_delete: bool = Field(
        default=False, description="delete this session's artifacts when the ProfileSession is deleted"
    )

    @model_validator(mode="after")
    def _scheme_fits_settings(self) -> "StorageSpec":
        if self.uri.startswith("file://") and self.endpoint is not None:
            raise ValueError(f"storage.endpoint only applies to s3:// and oss:// URIs, not to {self.uri}")
        if self.uri.startswith("file://") and self.credentials_secret is not None:
            raise ValueError(f"storage.credentialsSecret only applies to s3:// and oss:// URIs, not to {self.uri}")
        return self


class AnalysisResources(CamelModel):
    """Requests and limits of the analyzer Job's container."""

    cpu: Annotated[str, Field(max_length=32, pattern=QUANTITY)] = "1"
    memory: Annotated[str, Field(max_length=32, pattern=QUANTITY)] = "2Gi"


class AnalysisSpec(CamelModel):
    """The analyzer Job that reads every rank's trace and writes the verdict and the report."""

    enabled: bool = Field(default=True, description="run the analyzer Job once the traces are captured")
    outlier_threshold: Annotated[float, Field(ge=1.0, le=20.0)] = Field(
        default=3.5, description="robust z-score (median/MAD) above which a rank is an outlier"
    )
    min_slowdown_percent: Annotated[float, Field(ge=0.0, le=1000.0)] = Field(
        default=4.0, description="differences below this share of the median are never reported"
    )
    shards: Annotated[int, Field(ge=0, le=256)] = Field(
        default=0, description="Indexed Job parallelism for the per-rank map step; 0 chooses by rank count"
    )
    resources: AnalysisResources = Field(default_factory=AnalysisResources)


class BaselineSpec(CamelModel):
    """What the session is compared with (the regression gate): exactly one of session or uri."""

    session: Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)] | None = Field(
        default=None,
        description="a previous ProfileSession of this namespace, found in the sessions index of the storage "
        "(<storage.uri>/<namespace>/_sessions/<name>.json), so it may have been deleted since",
    )
    uri: Annotated[str, Field(max_length=1024, pattern=STORAGE_URI_PATTERN)] | None = Field(
        default=None,
        description="a report.json or a session folder in the same bucket as storage.uri (read with its credentials)",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> "BaselineSpec":
        if (self.session is None) == (self.uri is None):
            raise ValueError("set baseline.session (a previous session) or baseline.uri (a stored report), not both")
        return self


class GateSpec(CamelModel):
    """How much slower than the baseline a session may be before it is Regressed."""

    max_regression_percent: Annotated[float, Field(ge=0.0, le=1000.0)] = Field(
        default=10.0,
        description="Regressed when the steps are slower than the baseline by more than this, with confidence",
    )
    confidence: Annotated[float, Field(ge=0.5, le=0.999)] = Field(
        default=0.90, description="two-sided level of the interval of the slowdown; its lower end decides"
    )
    wall_clock: bool = Field(
        default=False,
        description="decide on the measured step times; by default the steps are compared at equal op speed (the "
        "per-call change of the ops that did not change is taken for the machine's speed and taken out)",
    )


def same_store(a: str, b: str) -> bool:
    """Two storage URIs in the same scheme and bucket (file://: any path)."""
    return a.partition("://")[0] == b.partition("://")[0] and (
        a.startswith("file://") or a.split("/")[2] == b.split("/")[2]
    )


class ProfileSessionSpec(CamelModel):
    """A profiling campaign; targets, capture, storage and analysis cannot change once the session exists."""

    targets: TargetSpec = Field(description="which training pods to profile: exactly one of selector or jobRef")
    capture: CaptureSpec = Field(default_factory=CaptureSpec, description="what to record on each of them")
    storage: StorageSpec = Field(
        description="where traces and the report go; what it leaves out comes from the operator's storage settings"
    )
    analysis: AnalysisSpec = Field(default_factory=AnalysisSpec, description="the cross-rank analysis")
    ttl_seconds_after_finished: Annotated[int, Field(ge=0, le=604_800)] = Field(
        default=3600, description="the analyzer Job is removed this long after it finishes"
    )
    baseline: BaselineSpec | None = Field(
        default=None, description="compare with this baseline after the analysis (condition Regressed)"
    )
    gate: GateSpec = Field(default_factory=GateSpec, description="the regression gate against the baseline")

    @model_validator(mode="after")
    def _baseline_in_store(self) -> "ProfileSessionSpec":
        uri = self.baseline.uri if self.baseline is not None else None
        if uri is not None and not same_store(uri, self.storage.uri):
            raise ValueError(f"baseline.uri {uri} must be in the same store (scheme and bucket) as {self.storage.uri}")
        return self


# --------------------------------------------------------------------------------------------- status


class Phase(StrEnum):
    PENDING = "Pending"
    RESOLVING = "Resolving"
    CAPTURING = "Capturing"
    UPLOADING = "Uploading"
    ANALYZING = "Analyzing"
    SUCCEEDED = "Succeeded"
    PARTIALLY_SUCCEEDED = "PartiallySucceeded"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.PARTIALLY_SUCCEEDED, Phase.FAILED)


class ConditionType(StrEnum):
    ACCEPTED = "Accepted"  # spec valid and not changed after start
    TARGETS_RESOLVED = "TargetsResolved"
    CAPTURED = "Captured"  # every target terminal
    REPORT_READY = "ReportReady"
    COMPLETE = "Complete"  # terminal with a report (Succeeded or PartiallySucceeded)
    FAILED = "Failed"  # terminal without a usable result
    FINISHED = "Finished"  # terminal, whatever the outcome (Succeeded, PartiallySucceeded or Failed): wait on this
    REGRESSED = "Regressed"  # the gate against spec.baseline: True (slower), False (passed), Unknown (no decision)


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(CamelModel):
    """Kubernetes condition conventions (metav1.Condition)."""

    type: ConditionType
    status: ConditionStatus
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")]
    message: Annotated[str, Field(max_length=32_768)] = ""
    last_transition_time: datetime
    observed_generation: Annotated[int, Field(ge=0)] | None = None


class TargetState(StrEnum):
    PENDING = "Pending"  # resolved, not yet signalled
    SIGNALLED = "Signalled"  # sidecar accepted the start request
    CAPTURING = "Capturing"
    UPLOADING = "Uploading"
    CAPTURED = "Captured"  # trace and manifest in storage
    HUNG = "Hung"  # no step boundary within stepTimeoutSeconds; stacks in storage; after the report: the culprit
    WAITING = "Waiting"  # hung, and the report found it waiting in a collective for the culprit (no fault of its own)
    DESYNC = "Desync"  # hung, and the report found it called another collective than its peers (the culprit)
    FAILED = "Failed"
    ABORTED = "Aborted"
    CRASHED = "Crashed"  # the training container terminated (its reason and exit code in the message)

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def standstill(self) -> bool:
        """Stopped stepping: hung, as the sidecar said, or as the report told it (culprit, desync or waiting)."""
        return self in _STANDSTILL


_STANDSTILL = frozenset({TargetState.HUNG, TargetState.WAITING, TargetState.DESYNC})
_TERMINAL = _STANDSTILL | {TargetState.CAPTURED, TargetState.FAILED, TargetState.ABORTED, TargetState.CRASHED}


class TargetStatus(CamelModel):
    pod: Annotated[str, Field(max_length=253)]
    node: Annotated[str, Field(max_length=253)] | None = None
    rank: Annotated[int, Field(ge=0)] | None = None
    state: TargetState = TargetState.PENDING
    message: Annotated[str, Field(max_length=1024)] = ""
    artifact_uri: Annotated[str, Field(max_length=2048)] | None = None
    attempts: Annotated[int, Field(ge=0)] = 0
    last_transition_time: datetime | None = None


class TargetCounts(CamelModel):
    total: Annotated[int, Field(ge=0)] = 0
    pending: Annotated[int, Field(ge=0)] = 0
    active: Annotated[int, Field(ge=0)] = 0
    captured: Annotated[int, Field(ge=0)] = 0
    hung: Annotated[int, Field(ge=0)] = Field(default=0, description="targets Hung: after a report, its culprits")
    waiting: Annotated[int, Field(ge=0)] = Field(default=0, description="hung targets the report found waiting")
    desync: Annotated[int, Field(ge=0)] = Field(default=0, description="targets the report found desynchronised")
    failed: Annotated[int, Field(ge=0)] = 0


class AnalysisStage(StrEnum):
    """Which analyzer Job `status.analyzerJob` names: one Job for everything, or an Indexed map Job then a reduce."""

    ALL = "All"
    MAP = "Map"
    REDUCE = "Reduce"


class GateChange(CamelModel):
    """One of the largest changes against the baseline (µs and calls per training step)."""

    name: Annotated[str, Field(max_length=256)]
    kind: Annotated[str, Field(max_length=32)]
    change: Annotated[str, Field(max_length=16)] = Field(description="added, removed or changed")
    baseline_us_per_step: float
    candidate_us_per_step: float
    delta_us_per_step: float = Field(description="candidate - baseline, measured")
    at_equal_op_speed_delta_us_per_step: float | None = Field(
        default=None,
        description="the same with the machine's speed taken out (diff.json's figure of that name): what the "
        "changes are ordered by, largest increase first",
    )
    count_delta: float
    rank: int | None = Field(default=None, description="the rank it sits on; absent: job-wide, per rank")


MAX_SUMMARY_CHANGES = 5
NO_BASELINE = "—"
"""status.summary.gateResult of a session that names no baseline"""
GATE_RESULTS = {"passed": "Passed", "improved": "Improved", "regressed": "Regressed", "unusable": "Undecided"}
"""status.summary.gate (diff.json's verdict) -> gateResult, the Gate printer column"""


class ReportSummary(CamelModel):
    """The few lines of the report that belong in `kubectl get`."""

    verdict: Annotated[str, Field(max_length=1024)] | None = Field(
        default=None,
        description="the analysis' verdict as the analyzer hands it back (AnalysisOutcome); a session's status "
        "tells it once, in status.message, and leaves it out here",
    )
    slowest_rank: Annotated[int, Field(ge=0)] | None = None
    slowest_node: Annotated[str, Field(max_length=253)] | None = None
    cause: Annotated[str, Field(max_length=64)] | None = None
    top_bottleneck: Annotated[str, Field(max_length=256)] | None = None
    slow_ranks: Annotated[list[int], Field(max_length=64)] = Field(default_factory=new_list)
    hung_ranks: Annotated[list[int], Field(max_length=64)] = Field(
        default_factory=new_list,
        description="the ranks that hold a standstill up (a hang's or a desync's culprits), not those waiting for them",
    )
    waiting_ranks: Annotated[list[int], Field(max_length=64)] | None = Field(
        default=None, description="hung ranks that wait for the culprits (in waitingIn); absent when none"
    )
    waiting_in: Annotated[str, Field(max_length=256)] | None = Field(
        default=None, description="the collective the waiting ranks wait in (the most of them), with its call site"
    )
    errored_ranks: Annotated[list[int], Field(max_length=64)] = Field(default_factory=new_list)
    median_step_ms: float | None = Field(default=None, description="the job's median step time")
    p90_step_ms: float | None = None
    slowdown_percent: float | None = Field(default=None, description="how much the slowest rank slows the job")
    estimated_speedup: float | None = Field(default=None, description="step time now / step time without it")
    gate: Annotated[str, Field(max_length=16)] | None = Field(
        default=None, description="against spec.baseline: passed, regressed, improved or unusable"
    )
    regression_percent: float | None = Field(
        default=None,
        description="how much slower than the baseline, in %: at equal op speed on CPU ranks unless "
        "spec.gate.wallClock (what the gate decided on)",
    )
    regression_low_percent: float | None = Field(default=None, description="lower end of its interval")
    regression_high_percent: float | None = Field(default=None, description="upper end of its interval")
    step_regression_percent: float | None = Field(
        default=None, description="how much slower the measured (wall-clock) steps are than the baseline's, in %"
    )
    added_work_percent: float | None = Field(
        default=None,
        description="the self time of what the candidate added, in % of the rest of its step (what the gate decided "
        "on beside the steps); absent when it added none",
    )
    added_work_low_percent: float | None = Field(default=None, description="lower end of its interval")
    added_work_high_percent: float | None = Field(default=None, description="upper end of its interval")
    gate_decided_by: Annotated[str, Field(max_length=32)] | None = Field(
        default=None, description="what cleared the gate: steps, added_work, or both (comma-separated)"
    )
    gate_result: Annotated[str, Field(max_length=16)] | None = Field(
        default=None,
        description="the Gate printer column: Passed, Improved, Regressed, Undecided (no comparison), or "
        f"{NO_BASELINE} when the session names no baseline",
    )
    gate_figure: Annotated[str, Field(max_length=64)] | None = Field(
        default=None,
        description="the figure that decided the gate, for the printer column: what cleared it when Regressed "
        "(added work or steps), else the steps' estimate (e.g. '+21.6% added work')",
    )
    baseline: Annotated[str, Field(max_length=2048)] | None = Field(default=None, description="the baseline used")
    top_changes: Annotated[list[GateChange], Field(max_length=MAX_SUMMARY_CHANGES)] | None = Field(
        default=None, description="largest changes against the baseline first"
    )


class ProfileSessionStatus(CamelModel):
    """Everything the operator and the analyzer know about a session; the operator keeps no other state."""

    model_config = ConfigDict(
        defer_build=True, alias_generator=to_camel, populate_by_name=True, extra="ignore", use_enum_values=False
    )

    phase: Phase = Phase.PENDING
    message: Annotated[str, Field(max_length=4096)] = ""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    conditions: Annotated[list[Condition], Field(max_length=16)] = Field(default_factory=new_list)
    capture_id: Annotated[str, Field(max_length=63)] | None = None
    start_time: datetime | None = None
    capture_deadline: datetime | None = None
    completion_time: datetime | None = None
    counts: TargetCounts = Field(default_factory=TargetCounts)
    progress: Annotated[str, Field(max_length=MAX_PROGRESS)] = Field(
        default="0/0",
        description="captured/total, for the printer column; after a hang's report, the rank the others wait for",
    )
    targets: Annotated[list[TargetStatus], Field(max_length=MAX_TARGET_STATUSES)] = Field(default_factory=new_list)
    targets_truncated: bool = False
    artifacts_uri: Annotated[str, Field(max_length=2048)] | None = None
    analyzer_job: Annotated[str, Field(max_length=253)] | None = None
    analysis_stage: AnalysisStage | None = Field(default=None, description="the stage analyzerJob runs")
    summary: ReportSummary | None = None
    report_url: Annotated[str, Field(max_length=2048)] | None = Field(default=None, alias="reportURL")
    report_json_url: Annotated[str, Field(max_length=2048)] | None = Field(default=None, alias="reportJSONURL")


class ObjectMeta(BaseModel):
    """The part of metadata stepscope reads."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    labels: dict[str, str] = Field(default_factory=new_dict)
    annotations: dict[str, str] = Field(default_factory=new_dict)


class ProfileSession(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="ignore", populate_by_name=True)

    api_version: str = Field(default="stepscope.dev/v1alpha1", alias="apiVersion")
    kind: Literal["ProfileSession"] = "ProfileSession"
    metadata: ObjectMeta
    spec: ProfileSessionSpec
    status: ProfileSessionStatus = Field(default_factory=ProfileSessionStatus)
