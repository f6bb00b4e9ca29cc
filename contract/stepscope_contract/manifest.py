"""manifest.json of a rank's folder in storage: what was captured, sizes, checksums, errors."""

from datetime import datetime
from typing import Annotated

from pydantic import Field

from stepscope_contract.empty import new_list
from stepscope_contract.session import CamelModel
from stepscope_contract.wire import CaptureState, RankMeta


class ArtifactFile(CamelModel):
    name: str
    size: Annotated[int, Field(ge=0)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    content_type: str = "application/octet-stream"


class RankManifest(CamelModel):
    schema_version: int = 1
    capture_id: str
    namespace: str
    session: str
    pod: str | None = None
    node: str | None = None
    rank: Annotated[int, Field(ge=0)]
    state: CaptureState
    files: list[ArtifactFile] = Field(default_factory=new_list)
    meta: RankMeta | None = None
    gpu_metrics: str = Field(default="not requested", description="'captured' or why there are none")
    errors: list[str] = Field(default_factory=new_list)
    capture_started_at: datetime | None = None
    capture_finished_at: datetime | None = None
    upload_finished_at: datetime | None = None
    upload_attempts: Annotated[int, Field(ge=0)] = 0
