"""A storage outage during a rank's upload, with the real uploader and a real moto server that is stopped and started
again on the same port with what it stored:

- an outage longer than botocore's attempts but shorter than the upload's deadline loses nothing: each file is sent
  again in rounds (each round logged) until storage is back, and what it held before the outage is still there;
- an outage that outlasts the deadline fails the rank with the attempts, the rounds and the last error;
- the pauses between rounds double up to their cap, and the upload's deadline leaves the operator its share.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from stepscope_contract.manifest import RankManifest
from stepscope_contract.storage import MANIFEST_FILE, AddressingStyle, parse_storage_uri, rank_artifact_key
from stepscope_contract.wire import CaptureState, StorageDestination
from stepscope_local.ports import free_port
from stepscope_local.s3 import ACCESS_KEY, SECRET_KEY, S3Server
from stepscope_sidecar.capture import upload_deadline
from stepscope_sidecar.uploader import MAX_PAUSE_SECONDS, UploadError, UploadStats, pause_before, upload_rank
from stepscope_storage import open_store
from stepscope_storage.checksums import sha256_bytes
from stepscope_storage.credentials import Credentials
from stepscope_storage.store import Store, TransferSettings

BUCKET = "outage"
SESSION = f"s3://{BUCKET}/sessions/default/outage-0123abcd"
OUTAGE_SECONDS = 3.0  # longer than botocore's 2 attempts below, far shorter than the upload's deadline
# requests that give up quickly while nothing listens, so the rounds are what outlasts the outage
TRANSFER = TransferSettings(attempts=2, connect_timeout=1.0, read_timeout=5.0)


def _store(endpoint: str) -> Store:
    session = parse_storage_uri(SESSION)
    destination = StorageDestination(session_uri=SESSION, endpoint=endpoint, addressing_style=AddressingStyle.PATH)
    return open_store(session, destination, Credentials(ACCESS_KEY, SECRET_KEY), TRANSFER)


def _rank_files(rank_dir: Path) -> list[Path]:
    rank_dir.mkdir(parents=True)
    trace = rank_dir / "trace.pt.trace.json.gz"
    trace.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 64)
    stacks = rank_dir / "stacks.txt"
    stacks.write_text("Thread 1 (most recent call first):\n  train.py:12 in step\n")
    return [trace, stacks]


def _manifest() -> RankManifest:
    return RankManifest(capture_id="cap-1", namespace="default", session="outage", rank=0, state=CaptureState.UPLOADED)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_an_outage_shorter_than_the_deadline_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with S3Server(log_path=tmp_path / "moto.log") as s3:
        s3.create_bucket(BUCKET)
        store = _store(s3.endpoint)
        session = parse_storage_uri(SESSION)
        before = store.write(f"{session.prefix}/session.json", b'{"kept": true}', "application/json")
        files = _rank_files(tmp_path / "rank-0")
        expected = {p.name: sha256_bytes(p.read_bytes()) for p in files}
        s3.stop(keep_objects=True)
        stats = UploadStats()
        done: dict[str, object] = {}

        def upload() -> None:
            try:
                done["artifacts"] = upload_rank(store, session, _manifest(), files, tmp_path / "rank-0",
                                                deadline=time.monotonic() + 90, stats=stats)  # fmt: skip
            except UploadError as exc:
                done["error"] = exc

        caplog.set_level(logging.WARNING, logger="stepscope_sidecar.uploader")
        worker = threading.Thread(target=upload)
        worker.start()
        time.sleep(OUTAGE_SECONDS)
        assert worker.is_alive(), f"the upload gave up during the outage: {done}"
        s3.start()
        worker.join(60)
        assert "error" not in done, done
        client = s3.client()
        keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET)["Contents"]}
        assert f"{session.prefix}/session.json" in keys and before.endswith("session.json")  # kept across the outage
        for name, digest in expected.items():
            body = client.get_object(Bucket=BUCKET, Key=rank_artifact_key(session, 0, name))["Body"].read()
            assert sha256_bytes(body) == digest, name
        assert rank_artifact_key(session, 0, MANIFEST_FILE) in keys
    assert stats.rounds >= 1
    rounds = [r.getMessage() for r in caplog.records if "round" in r.getMessage()]
    assert len(rounds) >= stats.rounds and "left before the upload deadline" in rounds[0], rounds


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_an_outage_past_the_deadline_fails_with_the_rounds(tmp_path: Path) -> None:
    store = _store(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    files = _rank_files(tmp_path / "rank-0")
    with pytest.raises(UploadError) as caught:
        upload_rank(store, parse_storage_uri(SESSION), _manifest(), files, tmp_path / "rank-0",
                    deadline=time.monotonic() + 2.5, stats=UploadStats())  # fmt: skip
    text = str(caught.value)
    assert "trace.pt.trace.json.gz" in text and "round(s)" in text and "attempt(s)" in text, text
    assert all(p.is_file() for p in files), "the local copy is kept"


@pytest.mark.unit
def test_pauses_double_to_their_cap_and_the_deadline_leaves_the_operator_its_share() -> None:
    assert [pause_before(r) for r in range(2, 8)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert MAX_PAUSE_SECONDS == 8.0
    # a 180 s capture whose window ended 20 s in: uploads until 10 s before its deadline
    assert upload_deadline(1180.0, 180, 1020.0) == 1170.0
    # a 90 s capture: a tenth of it is the operator's
    assert upload_deadline(1090.0, 90, 1010.0) == 1081.0
    # a window that ended late still gets min(timeoutSeconds, 60 s) for its upload
    assert upload_deadline(1090.0, 90, 1085.0) == 1145.0
