"""The sidecar control protocol (operator <-> sidecar over HTTP) and the hook file protocol
(sidecar <-> in-process hook over the shared volume).

HTTP API of the sidecar (all but /healthz need `Authorization: Bearer <token>`):
    POST /v1/captures                  CaptureRequest -> 202 CaptureStatus (200 if that id exists already;
                                       409 Conflict if another capture id is active); with
                                       options.dumpOnly: no profiling, every rank's stacks and Flight Recorder
                                       dump taken now by the hook's watchdog thread (works while training is stuck)
    GET  /v1/captures/{captureId}      -> CaptureStatus (404 if unknown)
    POST /v1/captures/{captureId}/abort -> CaptureStatus
    GET  /v1/status                    -> AgentStatus
    GET  /healthz                      -> 200 "ok"
    GET  /metrics                      -> Prometheus text

Hook files under $STEPSCOPE_HOOK_DIR (written atomically: temp file + rename):
    request.json                       HookRequest, written by the sidecar
    state/rank-<rank>.json             HookState, written by each training process's hook
    captures/<captureId>/rank-<rank>/  trace.pt.trace.json.gz, stacks.txt, flight_recorder.json.gz, meta.json
                                       (RankMeta)
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final

from pydantic import Field

from stepscope_contract.empty import new_list
from stepscope_contract.session import CamelModel, CaptureSpec
from stepscope_contract.storage import AddressingStyle

CAPTURE_ID_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
HOOK_REQUEST_FILE: Final = "request.json"
HOOK_STATE_DIR: Final = "state"
HOOK_CAPTURES_DIR: Final = "captures"
HOOK_META_FILE: Final = "meta.json"
PROTOCOL_VERSION: Final = 1


class SessionRef(CamelModel):
    namespace: Annotated[str, Field(min_length=1, max_length=63)]
    name: Annotated[str, Field(min_length=1, max_length=253)]
    uid: Annotated[str, Field(max_length=64)] = ""


class StorageDestination(CamelModel):
    """Where a sidecar uploads. Credentials are never sent: the sidecar reads them from its Secret env."""

    session_uri: Annotated[str, Field(max_length=2048)] = Field(
        description="the session's folder, e.g. s3://bucket/prefix/ns/session-uid8"
    )
    endpoint: Annotated[str, Field(max_length=512)] | None = None
    region: Annotated[str, Field(max_length=64)] | None = None
    addressing_style: AddressingStyle = AddressingStyle.AUTO


class CaptureOptions(CaptureSpec):
    """What a capture request asks of a sidecar: the session's spec.capture (declared once, in CaptureSpec: the same
    fields, defaults and bounds on the spec, on the wire and in the hook's request file), plus dumpOnly, which only a
    request asks (on-demand dumps; a session always profiles)."""

    dump_only: bool = Field(
        default=False,
        description="take every rank's Python stacks and Flight Recorder dump now, without profiling (stall triggers)",
    )

    @classmethod
    def from_spec(cls, spec: CaptureSpec) -> "CaptureOptions":
        """The options a session's spec.capture asks of every sidecar."""
        return cls.model_validate(spec.model_dump())


class CaptureRequest(CamelModel):
    capture_id: Annotated[str, Field(pattern=CAPTURE_ID_PATTERN)]
    session: SessionRef
    rank: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="rank the operator resolved for this pod; the hook's RANK env wins"
    )
    options: CaptureOptions
    destination: StorageDestination


class CaptureState(StrEnum):
    ARMED = "armed"  # request handed to the hook, waiting for skipSteps to pass
    CAPTURING = "capturing"
    WRITTEN = "written"  # trace on the shared volume, upload not started
    UPLOADING = "uploading"
    UPLOADED = "uploaded"  # terminal: everything in storage
    HUNG = "hung"  # terminal: no step boundary in time; stacks uploaded
    FAILED = "failed"  # terminal
    ABORTED = "aborted"  # terminal

    @property
    def terminal(self) -> bool:
        return self in (CaptureState.UPLOADED, CaptureState.HUNG, CaptureState.FAILED, CaptureState.ABORTED)


class UploadedArtifact(CamelModel):
    rank: Annotated[int, Field(ge=0)]
    uri: str


class CaptureStatus(CamelModel):
    capture_id: str
    state: CaptureState
    message: str = ""
    ranks: list[int] = Field(default_factory=new_list, description="ranks this pod captured")
    artifacts: list[UploadedArtifact] = Field(default_factory=new_list)
    steps_captured: Annotated[int, Field(ge=0)] = 0
    started_at: datetime | None = None
    updated_at: datetime | None = None


class AgentStatus(CamelModel):
    version: str
    protocol: int = PROTOCOL_VERSION
    pod: str | None = None
    node: str | None = None
    busy: bool = False
    current: CaptureStatus | None = None
    hook_ranks: list[int] = Field(default_factory=new_list, description="ranks whose hook reported in")
    gpu_metrics: str = Field(default="unknown", description="'available' or why not")


class ErrorBody(CamelModel):
    error: str
    detail: str = ""


# ------------------------------------------------------------------------------ hook file protocol


class HookRequest(CaptureOptions):
    """Written by the sidecar to request.json: the capture's options (flat, as on the wire) plus who and when; every
    hook in the pod acts on a new captureId once. The hook reads it with the stdlib (stepscope_hook._options, whose
    table of names, defaults and bounds a test holds against CaptureSpec)."""

    capture_id: Annotated[str, Field(pattern=CAPTURE_ID_PATTERN)]
    abort: bool = False
    requested_at: float = Field(description="unix time the request was written")

    @classmethod
    def from_options(cls, capture_id: str, options: CaptureOptions, requested_at: float) -> "HookRequest":
        """What the sidecar hands the hooks for a capture request's options."""
        return cls.model_validate({**options.model_dump(), "capture_id": capture_id, "requested_at": requested_at})


class HookPhase(StrEnum):
    IDLE = "idle"
    ARMED = "armed"
    CAPTURING = "capturing"
    WRITTEN = "written"
    HUNG = "hung"
    DUMPED = "dumped"  # a dumpOnly request answered: stacks and Flight Recorder dump written
    FAILED = "failed"
    ABORTED = "aborted"
    DISABLED = "disabled"  # the hook hit an internal error and switched itself off


class HookState(CamelModel):
    """Written by the hook of one training process to state/rank-<rank>.json."""

    rank: Annotated[int, Field(ge=0)]
    world_size: Annotated[int, Field(ge=1)] = 1
    local_rank: int | None = None
    local_world_size: int | None = Field(default=None, description="LOCAL_WORLD_SIZE: ranks in this pod")
    pid: int
    phase: HookPhase
    capture_id: str | None = None
    message: str = ""
    step: Annotated[int, Field(ge=0)] = 0
    steps_captured: Annotated[int, Field(ge=0)] = 0
    last_step_time: float | None = Field(default=None, description="unix time of the last step boundary")
    output_dir: str | None = None
    updated_at: float


class RankMeta(CamelModel):
    """meta.json beside a rank's trace: who produced it and how."""

    capture_id: str
    rank: Annotated[int, Field(ge=0)]
    world_size: Annotated[int, Field(ge=1)] = 1
    local_rank: int | None = None
    pod: str | None = None
    node: str | None = None
    hostname: str | None = None
    pid: int
    torch_version: str | None = None
    cuda_version: str | None = Field(default=None, description="the CUDA torch was built with (torch.version.cuda)")
    python_version: str | None = None
    device: str = Field(default="cpu", description="'cuda' when CUDA activity was recorded")
    steps_requested: int
    steps_captured: int
    step_durations_ms: list[float] = Field(default_factory=new_list)
    hung: bool = False
    seconds_since_last_step: float | None = None
    error: str | None = None
    dump_reason: str | None = Field(
        default=None, description="why stacks and the Flight Recorder dump were written: hang, exit or on-demand"
    )
    flight_recorder: str | None = Field(
        default=None, description="'written' (flight_recorder.json.gz beside the stacks) or why there is no dump"
    )
