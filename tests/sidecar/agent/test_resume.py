"""A sidecar restarted mid-capture (its container killed while it uploaded) carries on from the hook directory, the
pod's volume that outlived it:

- the rank an earlier process uploaded is taken from its record, not sent again; the rank it did not finish is sent
  from its local copy, and the capture ends uploaded with both ranks' artifacts;
- once finished, a later restart answers for the capture from its final status and resumes nothing.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stepscope_contract.storage import MANIFEST_FILE, TRACE_FILE, parse_storage_uri, rank_artifact_key
from stepscope_contract.wire import (
    CaptureOptions,
    CaptureRequest,
    CaptureState,
    HookPhase,
    HookState,
    SessionRef,
    StorageDestination,
    UploadedArtifact,
)
from stepscope_sidecar import capture_records as records
from stepscope_sidecar.agent import Agent
from stepscope_sidecar.agent_metrics import Metrics
from stepscope_sidecar.capture import AgentConfig
from stepscope_sidecar.hookfiles import HookDir

pytestmark = pytest.mark.unit
CAPTURE = "cap-0123456789abcdef"


def _hook_wrote(hooks: HookDir, rank: int) -> None:
    state = HookState(rank=rank, world_size=2, pid=1, phase=HookPhase.WRITTEN, capture_id=CAPTURE,
                      steps_captured=3, updated_at=time.time())  # fmt: skip
    (hooks.root / "state" / f"rank-{rank}.json").write_text(state.model_dump_json(by_alias=True))


def _resume(hook_dir: Path) -> tuple[list[str], Agent]:
    async def run() -> tuple[list[str], Agent]:
        agent = Agent(AgentConfig(hook_dir=hook_dir, poll_s=0.05), Metrics(), "no GPU")
        resumed = agent.resume()
        tasks = [r.task for r in agent.captures.values() if r.task is not None]
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
        return resumed, agent

    return asyncio.run(run())


def test_a_restarted_sidecar_resumes_from_the_local_copy(tmp_path: Path) -> None:
    hooks = HookDir(tmp_path / "hook")
    session_uri = f"file://{tmp_path}/store/default/s-1234abcd"
    session = parse_storage_uri(session_uri)
    request = CaptureRequest(capture_id=CAPTURE, session=SessionRef(namespace="default", name="s"),
                             options=CaptureOptions(steps=3, timeout_seconds=120),
                             destination=StorageDestination(session_uri=session_uri))  # fmt: skip
    # what the earlier sidecar process left: the request, rank 0 uploaded (its local copy gone), rank 1 not yet
    records.save_request(hooks, request, datetime.now(UTC) - timedelta(seconds=20))
    earlier = UploadedArtifact(rank=0, uri=f"file://{rank_artifact_key(session, 0, MANIFEST_FILE)}")
    records.save_rank(hooks, CAPTURE, 0, records.UploadedRank(state=CaptureState.UPLOADED, artifacts=[earlier]))
    for rank in (0, 1):
        _hook_wrote(hooks, rank)
    hooks.rank_dir(CAPTURE, 1).mkdir(parents=True)
    (hooks.rank_dir(CAPTURE, 1) / TRACE_FILE).write_bytes(b"not gzip: the summary fails, the trace still goes up")

    resumed, agent = _resume(hooks.root)
    assert resumed == [CAPTURE]
    status = agent.captures[CAPTURE].status
    assert status.state is CaptureState.UPLOADED, status
    uris = {a.uri for a in status.artifacts}
    assert earlier.uri in uris and f"file://{rank_artifact_key(session, 1, TRACE_FILE)}" in uris, uris
    assert not Path(rank_artifact_key(session, 0, TRACE_FILE)).exists(), "rank 0 was sent again"
    assert Path(rank_artifact_key(session, 1, TRACE_FILE)).is_file()
    assert Path(rank_artifact_key(session, 1, MANIFEST_FILE)).is_file()
    assert not hooks.rank_dir(CAPTURE, 1).exists(), "the local copy goes once in storage"

    again, later = _resume(hooks.root)
    assert again == [] and later.captures[CAPTURE].status == status
