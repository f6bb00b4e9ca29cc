"""A rank's upload through a storage outage (the real outage, with moto stopped and started again, is
tests/e2e/test_faults.py):

- a file whose requests ran out of the store's attempts is sent again in rounds, each round logged with what is left
  of the upload deadline, until the store takes it: nothing is lost, and the manifest counts every attempt;
- an outage that outlasts the deadline fails the rank with the attempts, the rounds and the last error, its local
  copy kept;
- the pauses between rounds double up to their cap, and the upload's deadline leaves the operator its share.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import MANIFEST_FILE, STACKS_FILE, TRACE_FILE, parse_storage_uri, rank_artifact_key
from stepscope_contract.wire import CaptureState
from stepscope_sidecar.capture import upload_deadline
from stepscope_sidecar.uploader import (
    MAX_PAUSE_SECONDS,
    UploadError,
    UploadStats,
    pause_before,
    upload_file,
    upload_rank,
)
from stepscope_storage import StorageError, Stored, TransferCounts
from stepscope_storage.local import LocalStore

pytestmark = pytest.mark.unit


class OutageStore(LocalStore):
    """A file:// store whose first `down` put_file calls fail as an unreachable S3 endpoint does after its attempts."""

    def __init__(self, down: int) -> None:
        super().__init__()
        self.down = down
        self.calls = self.attempts = 0

    @property
    def counts(self) -> TransferCounts:
        return TransferCounts(calls=self.calls, attempts=self.attempts)

    def put_file(self, local: Path, key: str, content_type: str, *, deadline: float | None = None) -> Stored:
        self.calls += 1
        if self.down > 0:
            self.down -= 1
            self.attempts += 3
            raise StorageError(f"cannot upload {key}: EndpointConnectionError: Could not connect to the endpoint URL")
        self.attempts += 1
        return super().put_file(local, key, content_type, deadline=deadline)


def _manifest() -> RankManifest:
    return RankManifest(capture_id="c-1", namespace="ns", session="s", rank=0, state=CaptureState.UPLOADED)


def test_an_outage_shorter_than_the_deadline_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rank_dir = tmp_path / "hook" / "rank-0"
    rank_dir.mkdir(parents=True)
    (rank_dir / TRACE_FILE).write_bytes(b"trace")
    (rank_dir / STACKS_FILE).write_text("stacks")
    session = parse_storage_uri(f"file://{tmp_path}/store/ns/s-1234abcd")
    store, stats, paused = OutageStore(down=4), UploadStats(), []
    caplog.set_level(logging.WARNING, logger="stepscope_sidecar.uploader")
    files = [rank_dir / TRACE_FILE, rank_dir / STACKS_FILE]
    uploaded = upload_rank(store, session, _manifest(), files, rank_dir, deadline=time.monotonic() + 600,
                           stats=stats, sleep=paused.append)  # fmt: skip
    keys = [rank_artifact_key(session, 0, name) for name in (TRACE_FILE, STACKS_FILE, MANIFEST_FILE)]
    assert [a.uri for a in uploaded] == [f"file://{k}" for k in keys]
    assert Path(keys[0]).read_bytes() == b"trace" and Path(keys[1]).read_text() == "stacks"
    assert paused == [1.0, 2.0, 4.0, 8.0] and stats.rounds == 4
    rounds = [r.getMessage() for r in caplog.records if "; round" in r.getMessage()]
    assert len(rounds) == 4 and "EndpointConnectionError" in rounds[0], rounds
    assert "round 2 in 1 s" in rounds[0] and "left before the upload deadline" in rounds[0], rounds
    manifest = json.loads(Path(keys[2]).read_text())
    assert manifest["uploadAttempts"] == stats.retries + stats.rounds + 3


def test_an_outage_past_the_deadline_fails_with_the_rounds(tmp_path: Path) -> None:
    (tmp_path / TRACE_FILE).write_bytes(b"x")
    paused: list[float] = []
    with pytest.raises(UploadError) as caught:
        upload_file(OutageStore(down=100), tmp_path / TRACE_FILE, "k", deadline=time.monotonic() + 3.5,
                    stats=UploadStats(), sleep=paused.append)  # fmt: skip
    text = str(caught.value)
    assert paused == [1.0, 2.0], "a pause that would pass the deadline is not taken"
    assert text.startswith(f"upload of {TRACE_FILE} failed after 9 attempt(s) in 3 round(s)"), text
    assert "EndpointConnectionError" in text and (tmp_path / TRACE_FILE).is_file()


def test_pauses_double_to_their_cap_and_the_deadline_leaves_the_operator_its_share() -> None:
    assert [pause_before(r) for r in range(2, 8)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert MAX_PAUSE_SECONDS == 8.0
    # a 180 s capture whose window ended 20 s in: uploads until 10 s before its deadline
    assert upload_deadline(1180.0, 180, 1020.0) == 1170.0
    # a 90 s capture: a tenth of it is the operator's
    assert upload_deadline(1090.0, 90, 1010.0) == 1081.0
    # a window that ended late still gets min(timeoutSeconds, 60 s) for its upload
    assert upload_deadline(1090.0, 90, 1085.0) == 1145.0
