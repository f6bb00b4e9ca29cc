from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_contract.session import AddressingStyle
from stepscope_contract.storage import Scheme, parse_storage_uri
from stepscope_contract.wire import StorageDestination
from stepscope_sidecar.retry import Backoff
from stepscope_sidecar.stores import FileStore, S3Store, TransferSettings, addressing_style, s3_endpoint
from stepscope_sidecar.uploader import UploadError, UploadStats, put_with_retry

pytestmark = pytest.mark.unit


def dest(**kw: object) -> StorageDestination:
    return StorageDestination.model_validate({"sessionUri": "s3://b/p", **kw})


def test_endpoints_for_s3_oss_and_minio() -> None:
    assert s3_endpoint(dest(), Scheme.S3) is None
    assert s3_endpoint(dest(endpoint="minio.local:9000"), Scheme.S3) == "https://minio.local:9000"
    assert s3_endpoint(dest(endpoint="http://127.0.0.1:9000"), Scheme.S3) == "http://127.0.0.1:9000"
    assert s3_endpoint(dest(region="cn-hangzhou"), Scheme.OSS) == "https://oss-cn-hangzhou.aliyuncs.com"
    with pytest.raises(ValueError, match="oss://"):
        s3_endpoint(dest(), Scheme.OSS)


def test_addressing_style_oss_is_always_virtual() -> None:
    assert addressing_style(dest(addressingStyle="path"), Scheme.OSS) == "virtual"
    assert addressing_style(dest(addressingStyle="path"), Scheme.S3) == "path"
    assert addressing_style(dest(), Scheme.S3) == AddressingStyle.AUTO.value


def test_s3_store_client_configuration() -> None:
    loc = parse_storage_uri("oss://bucket/prefix")
    store = S3Store(loc, dest(region="cn-beijing", addressingStyle="path"), TransferSettings(multipart_threshold=1234))
    client = store._client
    assert client.meta.endpoint_url == "https://oss-cn-beijing.aliyuncs.com"
    assert client.meta.config.s3["addressing_style"] == "virtual"
    assert store._transfer.multipart_threshold == 1234
    assert store.uri("prefix/x") == "oss://bucket/prefix/x"


class FlakyStore:
    """An external store double: fails `failures` times with `exc`, then keeps the bytes."""

    def __init__(self, failures: int, exc: Exception) -> None:
        self.failures, self.exc, self.kept = failures, exc, {}

    def put(self, local: Path, key: str, content_type: str) -> None:
        if self.failures:
            self.failures -= 1
            raise self.exc
        self.kept[key] = local.read_bytes()

    def confirm(self, key: str, size: int) -> bool:
        return len(self.kept.get(key, b"")) == size

    def uri(self, key: str) -> str:
        return key


def test_put_with_retry_retries_transient_errors(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    store, stats, slept = FlakyStore(3, ConnectionResetError("reset")), UploadStats(), []
    put_with_retry(store, tmp_path / "f", "k", deadline=1e18, stats=stats, backoff=Backoff(base=1), sleep=slept.append)
    assert store.kept == {"k": b"abc"} and stats.attempts == 4 and stats.retries == 3
    assert slept[0] < slept[2]


def test_put_with_retry_gives_up_on_permanent_errors_and_deadlines(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    with pytest.raises(UploadError, match="not retryable"):
        put_with_retry(
            FlakyStore(1, PermissionError("denied")), tmp_path / "f", "k", deadline=1e18, stats=UploadStats()
        )
    clock = iter(range(100)).__next__
    with pytest.raises(UploadError, match="out of retries/time"):
        put_with_retry(
            FlakyStore(99, TimeoutError()),
            tmp_path / "f",
            "k",
            deadline=5,
            stats=UploadStats(),
            sleep=lambda _: None,
            clock=lambda: float(clock()),
        )


def test_file_store_writes_atomically(tmp_path: Path) -> None:
    (tmp_path / "src").write_bytes(b"x" * 10)
    key = str(tmp_path / "out" / "a" / "trace.pt.trace.json.gz")
    FileStore().put(tmp_path / "src", key, "application/gzip")
    assert FileStore().confirm(key, 10) and not FileStore().confirm(key, 11)
    assert [p.name for p in (tmp_path / "out" / "a").iterdir()] == ["trace.pt.trace.json.gz"]
