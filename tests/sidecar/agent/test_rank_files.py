"""A rank's files are read the way a folder the training container writes must be: a rank file that is a symbolic
link (here to a file holding a secret, as `/proc/self/environ` holds the sidecar's storage keys) is not uploaded,
the manifest and the log say why; a rank folder that is a link is not entered; a FIFO is not a regular file; what
is uploaded is what was checked, read through its open descriptor; a manifest name planted as a link is replaced,
never written through."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from stepscope_contract.storage import FLIGHT_RECORDER_FILE, MANIFEST_FILE, STACKS_FILE, TRACE_FILE
from stepscope_contract.wire import (
    CaptureOptions,
    CaptureRequest,
    CaptureState,
    HookPhase,
    HookState,
    SessionRef,
    StorageDestination,
)
from stepscope_sidecar.agent_metrics import Metrics
from stepscope_sidecar.capture import AgentConfig, CaptureRun
from stepscope_sidecar.hookfiles import HookDir
from stepscope_sidecar.rank_files import open_rank_files

pytestmark = pytest.mark.unit
SECRET = b"AWS_SECRET_ACCESS_KEY=do-not-upload"


def _run(tmp_path: Path) -> tuple[CaptureRun, HookDir, Path]:
    hooks = HookDir(tmp_path / "run")
    store = tmp_path / "store"
    request = CaptureRequest(
        capture_id="cap-1",
        session=SessionRef(namespace="ns", name="s", uid="1234abcd-0000"),
        options=CaptureOptions(steps=2, activities=["cpu"], timeout_seconds=30),
        destination=StorageDestination(session_uri=f"file://{store}/ns/s-1234abcd"),
    )
    return CaptureRun(request, AgentConfig(hook_dir=hooks.root), hooks, Metrics()), hooks, store


def _state(phase: HookPhase) -> HookState:
    return HookState(rank=0, pid=1, phase=phase, capture_id="cap-1", updated_at=0.0)


def _stored(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def test_a_linked_rank_file_is_not_uploaded_and_the_reason_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run, hooks, store = _run(tmp_path)
    rank_dir = hooks.rank_dir("cap-1", 0)
    rank_dir.mkdir(parents=True)
    secret = tmp_path / "environ"
    secret.write_bytes(SECRET)
    (rank_dir / STACKS_FILE).write_text("Thread 1: train.py:10")
    (rank_dir / FLIGHT_RECORDER_FILE).symlink_to(secret)
    with caplog.at_level(logging.WARNING):
        outcome, _ = run._upload_rank(0, _state(HookPhase.DUMPED), None, False)
    stored = _stored(store)
    assert all(SECRET not in data for data in stored.values())
    names = {Path(k).name for k in stored}
    assert STACKS_FILE in names and MANIFEST_FILE in names and FLIGHT_RECORDER_FILE not in names
    manifest = json.loads(next(v for k, v in stored.items() if k.endswith(MANIFEST_FILE)))
    why = f"not uploaded: {FLIGHT_RECORDER_FILE}: a symbolic link, not followed"
    assert why in manifest["errors"] and [f["name"] for f in manifest["files"]] == [STACKS_FILE]
    assert f"{FLIGHT_RECORDER_FILE}: a symbolic link, not followed" in caplog.text
    assert outcome is CaptureState.UPLOADED


def test_a_linked_trace_fails_the_rank_and_a_linked_rank_folder_is_not_entered(tmp_path: Path) -> None:
    run, hooks, store = _run(tmp_path)
    rank_dir = hooks.rank_dir("cap-1", 0)
    rank_dir.mkdir(parents=True)
    (tmp_path / "secret.json").write_bytes(SECRET)
    (rank_dir / TRACE_FILE).symlink_to(tmp_path / "secret.json")
    outcome, _ = run._upload_rank(0, _state(HookPhase.WRITTEN), None, False)
    assert outcome is CaptureState.FAILED
    assert all(SECRET not in data for data in _stored(store).values())

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / STACKS_FILE).write_bytes(SECRET)
    with open_rank_files(hooks.root, hooks.rank_parts("cap-1", 1), [STACKS_FILE]) as held:
        assert held.files == [] and held.refused == []  # absent: nothing to say
    hooks.rank_dir("cap-1", 1).symlink_to(elsewhere)
    with open_rank_files(hooks.root, hooks.rank_parts("cap-1", 1), [STACKS_FILE]) as held:
        assert held.files == [] and held.refused == [
            "captures/cap-1/rank-1: not a folder (links are not followed); none of its files read"
        ]


def test_only_regular_files_are_kept_and_read_through_their_descriptor(tmp_path: Path) -> None:
    hooks = HookDir(tmp_path / "run")
    rank_dir = hooks.rank_dir("cap-1", 0)
    rank_dir.mkdir(parents=True)
    os.mkfifo(rank_dir / STACKS_FILE)
    (rank_dir / TRACE_FILE).write_bytes(b"checked")
    with open_rank_files(hooks.root, hooks.rank_parts("cap-1", 0), [TRACE_FILE, STACKS_FILE]) as held:
        assert held.refused == [f"{STACKS_FILE}: not a regular file"]
        (trace,) = held.files
        (rank_dir / TRACE_FILE).unlink()
        (rank_dir / TRACE_FILE).symlink_to(tmp_path)  # swapped after the check
        assert trace.source.read_bytes() == b"checked" and trace.size == 7


def test_a_linked_manifest_is_replaced_not_written_through(tmp_path: Path) -> None:
    run, hooks, store = _run(tmp_path)
    rank_dir = hooks.rank_dir("cap-1", 0)
    rank_dir.mkdir(parents=True)
    secret = tmp_path / "environ"
    secret.write_bytes(SECRET)
    (rank_dir / STACKS_FILE).write_text("Thread 1: train.py:10")
    (rank_dir / MANIFEST_FILE).symlink_to(secret)
    outcome, _ = run._upload_rank(0, _state(HookPhase.DUMPED), None, False)
    assert outcome is CaptureState.UPLOADED and secret.read_bytes() == SECRET
    stored = _stored(store)
    manifest = json.loads(next(v for k, v in stored.items() if k.endswith(MANIFEST_FILE)))
    assert manifest["captureId"] == "cap-1" and all(SECRET not in data for data in stored.values())
