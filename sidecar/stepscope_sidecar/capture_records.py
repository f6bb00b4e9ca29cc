"""What a capture leaves in the hook directory so that a restarted sidecar carries on where it stopped. The hook
directory is the pod's shared volume: it outlives the sidecar's container, as do the ranks' local copies in it.

    captures/<id>/sidecar-request.json    the request and when the capture started (written as it starts)
    captures/<id>/rank-<R>.uploaded.json  a rank's outcome once all its files are in storage (its local copy goes then)
    captures/<id>/sidecar-status.json     the capture's final status

A restarted sidecar answers for a finished capture from its final status, and resumes an unfinished one: it waits
for the hooks as before, skips the ranks already uploaded and sends the others from their local copies, within the
deadline the capture started with. Every write is atomic (a temporary file renamed); unreadable records are skipped.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from stepscope_contract.wire import CaptureRequest, CaptureState, CaptureStatus, UploadedArtifact
from stepscope_sidecar.hookfiles import HookDir

REQUEST_FILE = "sidecar-request.json"
STATUS_FILE = "sidecar-status.json"
MAX_RECORD_BYTES = 4 * 1024 * 1024
KEPT_CAPTURES = 32


class SavedRequest(BaseModel):
    request: CaptureRequest
    started_at: datetime


class UploadedRank(BaseModel):
    state: CaptureState
    message: str = ""
    artifacts: list[UploadedArtifact] = []


def _write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> bytes | None:
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_RECORD_BYTES else None


def save_request(hooks: HookDir, request: CaptureRequest, started_at: datetime) -> None:
    saved = SavedRequest(request=request, started_at=started_at)
    _write(hooks.capture_dir(request.capture_id) / REQUEST_FILE, saved.model_dump_json(by_alias=True))


def saved_requests(hooks: HookDir) -> list[SavedRequest]:
    """The captures this pod's sidecars started, oldest first (the last KEPT_CAPTURES of them)."""
    paths = sorted(hooks.root.glob(f"captures/*/{REQUEST_FILE}"), key=lambda p: p.stat().st_mtime)
    found = []
    for path in paths[-KEPT_CAPTURES:]:
        data = _read(path)
        try:
            saved = SavedRequest.model_validate_json(data) if data is not None else None
        except ValidationError:
            saved = None
        if saved is not None and path.parent.name == saved.request.capture_id:
            found.append(saved)
    return found


def _rank_path(hooks: HookDir, capture_id: str, rank: int) -> Path:
    return hooks.capture_dir(capture_id) / f"rank-{rank}.uploaded.json"


def save_rank(hooks: HookDir, capture_id: str, rank: int, uploaded: UploadedRank) -> None:
    _write(_rank_path(hooks, capture_id, rank), uploaded.model_dump_json(by_alias=True))


def uploaded_rank(hooks: HookDir, capture_id: str, rank: int) -> UploadedRank | None:
    data = _read(_rank_path(hooks, capture_id, rank))
    try:
        return UploadedRank.model_validate_json(data) if data is not None else None
    except ValidationError:
        return None


def save_status(hooks: HookDir, status: CaptureStatus) -> None:
    _write(hooks.capture_dir(status.capture_id) / STATUS_FILE, json.dumps(status.wire()))


def final_status(hooks: HookDir, capture_id: str) -> CaptureStatus | None:
    data = _read(hooks.capture_dir(capture_id) / STATUS_FILE)
    try:
        status = CaptureStatus.model_validate_json(data) if data is not None else None
    except ValidationError:
        return None
    return status if status is not None and status.state.terminal and status.capture_id == capture_id else None
