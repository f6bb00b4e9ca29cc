"""A rank's upload: every file to its place in the session's layout, the manifest last and truthful about attempts;
a failed upload names the file, the attempts and the last error (stores are stepscope_storage's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import MANIFEST_FILE, STACKS_FILE, TRACE_FILE, parse_storage_uri, rank_artifact_key
from stepscope_contract.wire import CaptureState
from stepscope_sidecar.uploader import UploadError, UploadStats, content_type, upload_file, upload_rank
from stepscope_storage import DeadlineExceeded, Stored, TransferCounts
from stepscope_storage.local import LocalStore

pytestmark = pytest.mark.unit


def _manifest(rank: int) -> RankManifest:
    return RankManifest(capture_id="c-1", namespace="ns", session="s", rank=rank, state=CaptureState.UPLOADED)


def test_files_go_to_the_layout_and_the_manifest_last(tmp_path: Path) -> None:
    rank_dir = tmp_path / "hook" / "rank-2"
    rank_dir.mkdir(parents=True)
    (rank_dir / TRACE_FILE).write_bytes(b"trace")
    (rank_dir / STACKS_FILE).write_text("stacks")
    session = parse_storage_uri(f"file://{tmp_path}/store/ns/s-1234abcd")
    stats = UploadStats()
    files = [rank_dir / TRACE_FILE, rank_dir / STACKS_FILE]
    uploaded = upload_rank(LocalStore(), session, _manifest(2), files, rank_dir, deadline=1e18, stats=stats)
    keys = [rank_artifact_key(session, 2, name) for name in (TRACE_FILE, STACKS_FILE, MANIFEST_FILE)]
    assert [a.uri for a in uploaded] == [f"file://{k}" for k in keys]
    assert keys[0].endswith("/traces/rank2.pt.trace.json.gz") and keys[2].endswith("/traces/rank2/manifest.json")
    manifest = json.loads(Path(keys[2]).read_text())
    assert manifest["uploadAttempts"] == 3 and manifest["uploadFinishedAt"]
    assert (stats.files, stats.retries, stats.bytes) == (3, 0, 5 + 6 + Path(keys[2]).stat().st_size)


class DeadStore(LocalStore):
    """A store whose transfers fail the way stepscope_storage reports a passed deadline."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    @property
    def counts(self) -> TransferCounts:
        return TransferCounts(calls=1 if self.sent else 0, attempts=self.sent)

    def put_file(self, local: Path, key: str, content_type: str, *, deadline: float | None = None) -> Stored:
        self.sent += 4
        raise DeadlineExceeded("the transfer deadline passed after 4 attempt(s): EndpointConnectionError: refused")


def test_a_failed_upload_names_the_file_the_attempts_and_the_error(tmp_path: Path) -> None:
    (tmp_path / TRACE_FILE).write_bytes(b"x")
    stats = UploadStats()
    with pytest.raises(UploadError) as info:
        upload_file(DeadStore(), tmp_path / TRACE_FILE, "k", deadline=0.0, stats=stats)
    text = str(info.value)
    assert text.startswith(f"upload of {TRACE_FILE} failed after 4 attempt(s)") and "EndpointConnectionError" in text
    assert (stats.attempts, stats.retries, stats.files) == (4, 3, 0)


def test_content_types() -> None:
    assert content_type(TRACE_FILE) == "application/gzip"
    assert content_type(MANIFEST_FILE) == "application/json"
    assert content_type(STACKS_FILE).startswith("text/plain")
