"""S3 transfers through stepscope_storage against moto behind a loopback proxy that fails what we tell it to:
botocore retries one failed part of a multipart upload (never the whole file), the transfer deadline ends
retrying with the last error, and what storage holds is checked against the SHA-256 that was sent."""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_harness import BUCKET, KEYS

from stepscope_contract.storage import AddressingStyle, parse_storage_uri
from stepscope_local.ports import free_port
from stepscope_storage import (
    ChecksumMismatch,
    DeadlineExceeded,
    StorageError,
    Store,
    TransferSettings,
    default_transfer,
    open_store,
)
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
MIB = 1024 * 1024
CREDS = Credentials(KEYS["AWS_ACCESS_KEY_ID"], KEYS["AWS_SECRET_ACCESS_KEY"])
SMALL = TransferSettings(attempts=3)
HOP_HEADERS = {"connection", "transfer-encoding", "content-length", "keep-alive"}


class FlakyProxy(ThreadingHTTPServer):
    """Forwards to moto; `fail(method, path_and_query)` decides which requests get a 503 SlowDown instead."""

    daemon_threads = True

    def __init__(self, upstream: str, fail: Callable[[str, str], bool], mangle: bool = False) -> None:
        self.upstream = urlsplit(upstream)
        self.fail = fail
        self.mangle = mangle  # flip one byte of every PUT body on its way (a corrupting hop), length unchanged
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", free_port()), _Forward)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FlakyProxy

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            self.server.seen.append((self.command, self.path))
            failing = self.server.fail(self.command, self.path)
        if self.server.mangle and self.command == "PUT" and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        if failing:
            payload = b"<Error><Code>SlowDown</Code><Message>slow down</Message></Error>"
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS | {"expect"}}
        conn.request(self.command, self.path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in HOP_HEADERS:
                self.send_header(key, value)
        self.send_header("Content-Length", response.getheader("Content-Length") or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


@pytest.fixture
def proxy(moto: str, raw_s3: Any) -> Iterator[Callable[..., FlakyProxy]]:
    started: list[FlakyProxy] = []

    def start(fail: Callable[[str, str], bool], mangle: bool = False) -> FlakyProxy:
        server = FlakyProxy(moto, fail, mangle)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def _store(endpoint: str, prefix: str, **transfer: Any) -> tuple[Store, str]:
    location = parse_storage_uri(f"s3://{BUCKET}/{prefix}")
    store = open_store(location, Connection(endpoint, "us-east-1", AddressingStyle.PATH), CREDS,
                       TransferSettings(multipart_threshold=MIB, **transfer))  # fmt: skip
    return store, location.key("trace.bin")


def _part(path: str) -> int | None:
    query = parse_qs(urlsplit(path).query)
    return int(query["partNumber"][0]) if "partNumber" in query else None


def test_a_failed_part_is_retried_alone(proxy: Any, tmp_path: Path, raw_s3: Any) -> None:
    failed: list[int] = []

    def second_part_once(method: str, path: str) -> bool:
        if method == "PUT" and _part(path) == 2 and not failed:
            failed.append(2)
            return True
        return False

    server = proxy(second_part_once)
    store, key = _store(server.url, "per-part", attempts=3, multipart_chunk=5 * MIB)
    data = os.urandom(6 * MIB)  # two parts: s3transfer's parts are at least 5 MiB
    (tmp_path / "f").write_bytes(data)
    stored = store.put_file(tmp_path / "f", key, "application/octet-stream", deadline=time.monotonic() + 60)
    parts = [_part(p) for m, p in server.seen if m == "PUT" and _part(p) is not None]
    assert sorted(parts) == [1, 2, 2], server.seen  # part 2 twice, part 1 once: not the whole file again
    assert sum(1 for m, p in server.seen if m == "POST" and "uploads" in p) == 1  # one multipart upload
    assert store.counts.retries == 1
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    assert raw_s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data


def test_a_small_file_is_one_put_checked_by_its_etag(proxy: Any, tmp_path: Path, raw_s3: Any) -> None:
    server = proxy(lambda method, path: False)
    store, key = _store(server.url, "small")
    data = os.urandom(200 * 1024)  # below the multipart threshold (1 MiB here)
    (tmp_path / "f").write_bytes(data)
    stored = store.put_file(tmp_path / "f", key, "application/gzip", deadline=time.monotonic() + 60)
    assert [m for m, _ in server.seen] == ["PUT"]  # no HEAD after it: the reply's ETag is the body's MD5
    assert stored.sha256 == hashlib.sha256(data).hexdigest() and stored.size == len(data)
    head = raw_s3.head_object(Bucket=BUCKET, Key=key)
    assert head["Metadata"]["sha256"] == stored.sha256 and head["ContentType"] == "application/gzip"
    assert raw_s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data


def test_the_deadline_ends_retrying_with_the_last_error(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused, which botocore retries
    store, key = _store(dead, "deadline", attempts=50)
    (tmp_path / "f").write_bytes(b"z" * 100)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded) as info:
        store.put_file(tmp_path / "f", key, "application/octet-stream", deadline=began + 2.0)
    assert 2.0 <= time.monotonic() - began < 30  # stopped at the first failed attempt after the deadline
    assert "EndpointConnectionError" in str(info.value) and "attempt" in str(info.value)
    assert store.counts.attempts >= 2 and store.counts.retries >= 1


def test_without_a_deadline_the_attempts_run_out(tmp_path: Path) -> None:
    store, key = _store(f"http://127.0.0.1:{free_port()}", "attempts", attempts=2)
    (tmp_path / "f").write_bytes(b"z")
    with pytest.raises(StorageError, match="EndpointConnectionError") as info:
        store.put_file(tmp_path / "f", key, "application/octet-stream")
    assert not isinstance(info.value, DeadlineExceeded)
    assert store.counts.attempts == 2


@pytest.mark.parametrize(("value", "attempts"), [("2", 2), ("0", 1), ("99", 20), ("many", 10), ("", 10)])
def test_aws_max_attempts_sets_the_attempts_where_the_caller_sets_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, attempts: int
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", value)
    assert default_transfer() == TransferSettings(attempts=attempts)
    if value != "2":
        return
    location = parse_storage_uri(f"s3://{BUCKET}/env-attempts")
    dead = Connection(f"http://127.0.0.1:{free_port()}", "us-east-1", AddressingStyle.PATH)
    (tmp_path / "f").write_bytes(b"z")
    # no TransferSettings: the environment's attempts; a caller's settings win over it
    for store, tries in ((open_store(location, dead, CREDS), 2), (open_store(location, dead, CREDS, SMALL), 3)):
        with pytest.raises(StorageError, match="EndpointConnectionError"):
            store.put_file(tmp_path / "f", location.key("f"), "application/octet-stream")
        assert store.counts.attempts == tries


def test_a_download_that_does_not_match_the_recorded_sha256_is_refused(moto: str, raw_s3: Any, tmp_path: Path) -> None:
    store, key = _store(moto, "tampered")
    (tmp_path / "f").write_bytes(b"the real bytes")
    stored = store.put_file(tmp_path / "f", key, "application/octet-stream")
    raw_s3.put_object(Bucket=BUCKET, Key=key, Body=b"other bytes!!!", Metadata={"sha256": stored.sha256})
    with pytest.raises(ChecksumMismatch, match="SHA-256"):
        store.get_file(key, tmp_path / "down")
    assert not (tmp_path / "down").exists()


def test_a_small_upload_is_one_put_and_a_body_changed_on_its_way_is_refused(
    proxy: Any, tmp_path: Path, raw_s3: Any
) -> None:
    """Below the multipart threshold a file goes up as one PUT carrying its Content-MD5 and no HEAD follows: the
    store itself refuses a body that arrived changed, so nothing wrong is stored and the upload fails."""
    (tmp_path / "f").write_bytes(b"a rank's summary" * 100)
    clean = proxy(lambda m, p: False)
    store, key = _store(clean.url, "one-put")
    stored = store.put_file(tmp_path / "f", key, "application/json")
    assert [m for m, _ in clean.seen] == ["PUT"] and store.counts.calls == 1
    assert raw_s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == (tmp_path / "f").read_bytes()
    assert stored.sha256 == hashlib.sha256((tmp_path / "f").read_bytes()).hexdigest()

    corrupting = proxy(lambda m, p: False, mangle=True)
    store, key = _store(corrupting.url, "mangled", attempts=1)
    with pytest.raises(StorageError, match="changed on the way"):
        store.put_file(tmp_path / "f", key, "application/json")
    with pytest.raises(raw_s3.exceptions.NoSuchKey):
        raw_s3.get_object(Bucket=BUCKET, Key=key)
