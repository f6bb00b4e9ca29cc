"""The Store protocol, the same behaviour on every backend of stepscope_storage.BACKENDS: file://, s3:// (moto on
loopback, path style) and oss:// reached through its region alone (the OSS endpoint template points at moto)."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_harness import BUCKET, KEYS

from stepscope_contract.storage import AddressingStyle, Scheme, StorageLocation, parse_storage_uri
from stepscope_storage import BACKENDS, StorageError, Store, TooLargeError, TransferSettings, open_store
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials
from stepscope_storage.endpoints import ENV_OSS_ENDPOINT_TEMPLATE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
SMALL_PARTS = TransferSettings(multipart_threshold=1024, attempts=3)


@pytest.fixture(params=[Scheme.FILE, Scheme.S3, Scheme.OSS], ids=lambda s: s.value)
def opened(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Store, StorageLocation]]:
    scheme: Scheme = request.param
    creds = Credentials(KEYS["AWS_ACCESS_KEY_ID"], KEYS["AWS_SECRET_ACCESS_KEY"])
    if scheme is Scheme.FILE:
        location = parse_storage_uri(f"file://{tmp_path}/base/ns/s-1234abcd")
        yield open_store(location), location
        return
    moto: str = request.getfixturevalue("moto")
    request.getfixturevalue("raw_s3")  # the bucket
    folder = f"{scheme.value}-{request.node.name}".replace("[", "-").replace("]", "")
    location = parse_storage_uri(f"{scheme.value}://{BUCKET}/{folder}/ns/s-1234abcd")
    if scheme is Scheme.S3:
        yield open_store(location, Connection(moto, "us-east-1", AddressingStyle.PATH), creds, SMALL_PARTS), location
    else:  # oss:// with only a region: the endpoint comes from the (test) template
        monkeypatch.setenv(ENV_OSS_ENDPOINT_TEMPLATE, moto)
        yield open_store(location, Connection(region="cn-hangzhou"), creds, SMALL_PARTS), location


def test_every_scheme_has_a_backend() -> None:
    assert set(BACKENDS) == set(Scheme)


def test_write_read_list_exists(opened: tuple[Store, StorageLocation]) -> None:
    store, loc = opened
    a, b = loc.child("report").key("report.json"), loc.child("traces", "rank0").key("manifest.json")
    assert store.write(a, b'{"a": 1}', "application/json") == store.uri(a)
    store.write(b, b"{}", "application/json")
    assert store.read(a) == b'{"a": 1}' and store.exists(a) and not store.exists(a + ".nope")
    assert store.list_keys(loc) == sorted([a, b])
    assert store.uri(a).startswith(f"{loc.scheme.value}://")


def test_reads_are_bounded(opened: tuple[Store, StorageLocation]) -> None:
    store, loc = opened
    key = loc.key("big.txt")
    store.write(key, b"x" * 1000, "text/plain")
    with pytest.raises(TooLargeError) as info:
        store.read(key, most=100)
    assert info.value.size == 1000
    assert store.read(key, most=100, truncate=True) == b"x" * 100
    assert store.read(key, most=1000) == b"x" * 1000
    with pytest.raises(StorageError):
        store.read(loc.key("missing.txt"))


def test_put_file_checks_what_was_stored_and_get_file_brings_it_back(
    opened: tuple[Store, StorageLocation], tmp_path: Path
) -> None:
    store, loc = opened
    local = tmp_path / "trace.bin"
    data = os.urandom(6000)  # above the multipart threshold of the object stores here
    local.write_bytes(data)
    key = loc.child("traces").key("rank3.pt.trace.json.gz")
    before = store.counts
    stored = store.put_file(local, key, "application/gzip", deadline=None)
    assert (stored.size, stored.sha256, stored.uri) == (6000, hashlib.sha256(data).hexdigest(), store.uri(key))
    assert store.counts.attempts > before.attempts and store.counts.retries == before.retries
    back = tmp_path / "down" / "again.bin"
    assert store.get_file(key, back).sha256 == stored.sha256 and back.read_bytes() == data
    assert not [p for p in back.parent.iterdir() if p.name != "again.bin"]  # no partial file left behind


def test_delete_prefix_removes_the_folder_and_nothing_beside_it(opened: tuple[Store, StorageLocation]) -> None:
    store, loc = opened
    neighbour = StorageLocation(loc.scheme, loc.bucket, loc.prefix + "-neighbour")
    for where in (loc.child("traces"), loc.child("report"), neighbour):
        store.write(where.key("f.json"), b"{}", "application/json")
    assert store.delete_prefix(loc) == 2
    assert store.list_keys(neighbour) == [neighbour.key("f.json")]
    if loc.scheme is not Scheme.FILE:
        with pytest.raises(StorageError, match="whole bucket"):
            store.delete_prefix(StorageLocation(loc.scheme, loc.bucket, ""))


def test_delete_removes_one_object_and_says_when_there_was_none(opened: tuple[Store, StorageLocation]) -> None:
    store, loc = opened
    kept, gone = loc.key("kept.json"), loc.key("gone.json")
    for key in (kept, gone):
        store.write(key, b"{}", "application/json")
    assert store.delete(gone) is True
    assert not store.exists(gone) and store.exists(kept)
    assert store.delete(gone) is False  # already gone: not an error, and said so


def test_uploads_above_the_threshold_are_multipart(
    opened: tuple[Store, StorageLocation], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, loc = opened
    if loc.scheme is Scheme.FILE:
        pytest.skip("file:// has no parts")
    raw: Any = request.getfixturevalue("raw_s3")
    local = tmp_path / "f"
    local.write_bytes(b"y" * 4096)
    key = loc.key("multi.bin")
    store.put_file(local, key, "application/octet-stream")
    head = raw.head_object(Bucket=BUCKET, Key=key)
    assert head["ETag"].strip('"').endswith("-1")  # one part of a multipart upload
    assert head["Metadata"]["sha256"] == hashlib.sha256(b"y" * 4096).hexdigest()
