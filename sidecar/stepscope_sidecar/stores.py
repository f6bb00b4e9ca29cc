"""Object stores the sidecar writes to: S3, Alibaba OSS and MinIO through boto3, or a local folder."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from stepscope_contract.session import AddressingStyle
from stepscope_contract.storage import Scheme, StorageLocation
from stepscope_contract.wire import StorageDestination

DEFAULT_MULTIPART_THRESHOLD = 8 * 1024 * 1024
DEFAULT_MULTIPART_CHUNK = 8 * 1024 * 1024


class Store(Protocol):
    def put(self, local: Path, key: str, content_type: str) -> None: ...

    def confirm(self, key: str, size: int) -> bool: ...

    def uri(self, key: str) -> str: ...


@dataclass(frozen=True)
class TransferSettings:
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    multipart_chunk: int = DEFAULT_MULTIPART_CHUNK
    connect_timeout: float = 5.0
    read_timeout: float = 30.0


class FileStore:
    """file:// destinations: keys are absolute paths; written to a temp name, synced, then renamed."""

    def put(self, local: Path, key: str, content_type: str) -> None:
        target = Path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part")
        shutil.copyfile(local, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    def confirm(self, key: str, size: int) -> bool:
        try:
            return Path(key).stat().st_size == size
        except OSError:
            return False

    def uri(self, key: str) -> str:
        return f"file://{key}"


def s3_endpoint(dest: StorageDestination, scheme: Scheme) -> str | None:
    """The endpoint URL: the destination's, else Alibaba OSS's regional one for oss://, else AWS's default."""
    if dest.endpoint:
        return dest.endpoint if "://" in dest.endpoint else f"https://{dest.endpoint}"
    if scheme is Scheme.OSS:
        if not dest.region:
            raise ValueError("oss:// needs an endpoint or a region (e.g. cn-hangzhou)")
        region = dest.region if dest.region.startswith("oss-") else f"oss-{dest.region}"
        return f"https://{region}.aliyuncs.com"
    return None


def addressing_style(dest: StorageDestination, scheme: Scheme) -> str:
    """OSS only serves virtual-hosted requests; S3 and MinIO take what the destination says."""
    if scheme is Scheme.OSS:
        return "virtual"
    return dest.addressing_style.value if dest.addressing_style is not AddressingStyle.AUTO else "auto"


class S3Store:
    """S3-compatible store; botocore's own retries are off: the uploader retries with its own backoff."""

    def __init__(self, location: StorageLocation, dest: StorageDestination, settings: TransferSettings) -> None:
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.location = location
        endpoint = s3_endpoint(dest, location.scheme)
        extra: dict[str, Any] = {}
        if endpoint is not None:  # S3-compatible services: no flexible-checksum trailers they may not speak
            extra = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
        config = Config(
            region_name=dest.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
            s3={"addressing_style": addressing_style(dest, location.scheme)},
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            **extra,
        )
        # credentials: boto3's default chain, i.e. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the Secret
        self._client = boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)
        self._transfer = TransferConfig(
            multipart_threshold=settings.multipart_threshold,
            multipart_chunksize=settings.multipart_chunk,
            max_concurrency=4,
        )

    def put(self, local: Path, key: str, content_type: str) -> None:
        self._client.upload_file(
            str(local),
            self.location.bucket,
            key,
            ExtraArgs={"ContentType": content_type},
            Config=self._transfer,
        )

    def confirm(self, key: str, size: int) -> bool:
        head = self._client.head_object(Bucket=self.location.bucket, Key=key)
        return int(head.get("ContentLength", -1)) == size

    def uri(self, key: str) -> str:
        return f"{self.location.scheme.value}://{self.location.bucket}/{key}"


def make_store(location: StorageLocation, dest: StorageDestination, settings: TransferSettings) -> Store:
    if location.scheme is Scheme.FILE:
        return FileStore()
    return S3Store(location, dest, settings)
