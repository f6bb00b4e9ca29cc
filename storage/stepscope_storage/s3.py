"""S3 and the S3-compatible stores (Alibaba OSS, MinIO) through boto3: the only module that imports it.

Retries are botocore's own (standard mode, `TransferSettings.attempts` per request): a failed part of a multipart
upload is sent again, not the whole file. A transfer deadline is enforced from botocore's retry hook: once it has
passed, the next failed attempt ends the transfer with DeadlineExceeded (the last error in its message) instead of
another wait. Every upload carries its SHA-256 as user metadata and is checked (size and SHA-256) once stored;
downloads are checked against it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

from stepscope_contract.storage import StorageLocation
from stepscope_storage.checksums import METADATA_KEY, sha256_bytes, sha256_file
from stepscope_storage.credentials import Credentials
from stepscope_storage.endpoints import EndpointSettings, addressing_style, endpoint_url, region_of
from stepscope_storage.store import (
    ChecksumMismatch,
    DeadlineExceeded,
    StorageError,
    Stored,
    TooLargeError,
    TransferCounts,
    TransferSettings,
)

MAX_ERROR_CHARS = 400


def describe(exc: BaseException) -> str:
    """One bounded line for a status message."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _failed(response: Any, caught: BaseException | None) -> str | None:
    """What went wrong with one attempt, or None when it worked (or failed in a way no retry changes)."""
    if caught is not None:
        return describe(caught)
    if response is None:
        return None
    status = getattr(response[0], "status_code", 0)
    if status >= 500 or status == 429:
        code = (response[1] or {}).get("Error", {}).get("Code", "")
        return f"HTTP {status} {code}".strip()
    return None


class S3Store:
    """One bucket of S3, OSS or MinIO."""

    def __init__(
        self,
        location: StorageLocation,
        settings: EndpointSettings,
        credentials: Credentials | None,
        transfer: TransferSettings,
    ) -> None:
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self._scheme = location.scheme
        self._bucket = location.bucket
        try:
            endpoint = endpoint_url(location.scheme, settings.endpoint, settings.region)
        except ValueError as exc:
            raise StorageError(str(exc)) from exc
        extra: dict[str, Any] = {}
        if endpoint is not None:  # S3-compatible services: no flexible-checksum trailers they may not speak
            extra = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
        config = Config(
            region_name=region_of(settings.region),
            s3={"addressing_style": addressing_style(location.scheme, settings.addressing_style)},
            retries={"mode": transfer.retry_mode, "total_max_attempts": max(1, transfer.attempts)},
            connect_timeout=transfer.connect_timeout,
            read_timeout=transfer.read_timeout,
            **extra,
        )
        keys: dict[str, Any] = {}
        if credentials is not None:
            keys = {
                "aws_access_key_id": credentials.access_key_id,
                "aws_secret_access_key": credentials.secret_access_key,
                "aws_session_token": credentials.session_token,
            }
        self._client = boto3.session.Session(**keys).client("s3", endpoint_url=endpoint, config=config)
        self._transfer = TransferConfig(
            multipart_threshold=transfer.multipart_threshold,
            multipart_chunksize=transfer.multipart_chunk,
            max_concurrency=transfer.max_concurrency,
        )
        self._lock = threading.Lock()
        self._counts = TransferCounts()
        self._deadline: float | None = None
        events = self._client.meta.events
        events.register("before-call.s3", self._on_call)
        events.register("before-send.s3", self._on_send)
        events.register("needs-retry.s3", self._on_needs_retry)

    # -- botocore hooks ------------------------------------------------------------------------------------------
    def _on_call(self, **_: Any) -> None:
        with self._lock:
            self._counts.calls += 1

    def _on_send(self, **_: Any) -> None:
        with self._lock:
            self._counts.attempts += 1

    def _on_needs_retry(
        self, response: Any = None, caught_exception: BaseException | None = None, attempts: int = 1, **_: Any
    ) -> None:
        deadline = self._deadline
        if deadline is None or time.monotonic() < deadline:
            return
        why = _failed(response, caught_exception)
        if why is not None:
            raise DeadlineExceeded(f"the transfer deadline passed after {attempts} attempt(s) of a request: {why}")

    # -- the Store protocol --------------------------------------------------------------------------------------
    @property
    def counts(self) -> TransferCounts:
        with self._lock:
            return TransferCounts(self._counts.calls, self._counts.attempts)

    def _fail(self, what: str, key: str, exc: BaseException) -> StorageError:
        if isinstance(exc, StorageError):
            return exc
        return StorageError(f"{what} {self.uri(key)}: {describe(exc)}")

    def uri(self, key: str) -> str:
        return f"{self._scheme.value}://{self._bucket}/{key}"

    def list_keys(self, location: StorageLocation) -> list[str]:
        prefix = location.prefix.strip("/")
        prefix = f"{prefix}/" if prefix else ""
        keys: list[str] = []
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix):
                keys.extend(str(obj["Key"]) for obj in page.get("Contents", []))
        except Exception as exc:
            raise self._fail("cannot list", prefix, exc) from exc
        return sorted(keys)

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        try:
            extra = {"Range": f"bytes=0-{most - 1}"} if most is not None and truncate and most > 0 else {}
            response = self._client.get_object(Bucket=self._bucket, Key=key, **extra)
            size = int(response.get("ContentLength", 0) or 0)
            body = response["Body"]
            if most is not None and size > most and not truncate:
                body.close()
                raise TooLargeError(key, size)
            if most is None:
                return bytes(body.read())
            data = bytes(body.read(most if truncate else most + 1))  # a length the reply did not announce
            if len(data) > most:
                body.close()
                raise TooLargeError(key, len(data))
            return data
        except TooLargeError:
            raise
        except Exception as exc:
            raise self._fail("cannot read", key, exc) from exc

    def exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self._bucket, Key=key)
        except Exception:
            return False
        return True

    def write(self, key: str, data: bytes, content_type: str) -> str:
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=data,
                ContentType=content_type,
                Metadata={METADATA_KEY: sha256_bytes(data)},
            )
        except Exception as exc:
            raise self._fail("cannot write", key, exc) from exc
        return self.uri(key)

    def _head(self, key: str) -> tuple[int, str | None]:
        head = self._client.head_object(Bucket=self._bucket, Key=key)
        return int(head.get("ContentLength", -1)), (head.get("Metadata") or {}).get(METADATA_KEY)

    def _put_small(self, data: bytes, key: str, content_type: str, digest: str) -> tuple[int, str | None]:
        """One PUT with Content-MD5 (the store refuses a body that does not match it); its ETag, the MD5 of a
        single-part object, confirms what was stored without another request. An ETag that is not that MD5 (a
        store that encrypts with its own keys) is checked by a HEAD instead."""
        md5 = hashlib.md5(data, usedforsecurity=False)
        response = self._client.put_object(
            Bucket=self._bucket,
            Key=key,
            Body=data,
            ContentType=content_type,
            ContentMD5=base64.b64encode(md5.digest()).decode(),
            Metadata={METADATA_KEY: digest},
        )
        if str(response.get("ETag", "")).strip('"') == md5.hexdigest():
            return len(data), digest
        return self._head(key)

    def put_file(self, local: Path, key: str, content_type: str, *, deadline: float | None = None) -> Stored:
        """A file below the multipart threshold goes in one PUT checked by its ETag; a larger one in parts
        (s3transfer), checked by a HEAD of the stored object."""
        size = local.stat().st_size
        small = size < self._transfer.multipart_threshold
        data = local.read_bytes() if small else b""
        digest = sha256_bytes(data) if small else sha256_file(local)
        self._deadline = deadline
        try:
            if small:
                stored_size, stored_digest = self._put_small(data, key, content_type, digest)
            else:
                self._client.upload_file(
                    str(local),
                    self._bucket,
                    key,
                    ExtraArgs={"ContentType": content_type, "Metadata": {METADATA_KEY: digest}},
                    Config=self._transfer,
                )
                stored_size, stored_digest = self._head(key)
        except Exception as exc:
            raise self._fail("cannot upload", key, exc) from exc
        finally:
            self._deadline = None
        if stored_size != size or stored_digest not in (None, digest):
            raise ChecksumMismatch(
                f"{self.uri(key)}: storage holds {stored_size} bytes (SHA-256 {stored_digest}), "
                f"{size} bytes (SHA-256 {digest}) were sent"
            )
        return Stored(self.uri(key), size, digest)

    def get_file(self, key: str, local: Path) -> Stored:
        tmp = local.with_name(f".{local.name}.part")
        try:
            size, recorded = self._head(key)
            local.parent.mkdir(parents=True, exist_ok=True)
            self._client.download_file(self._bucket, key, str(tmp), Config=self._transfer)
            digest = sha256_file(tmp)
            if tmp.stat().st_size != size or recorded not in (None, digest):
                raise ChecksumMismatch(
                    f"{self.uri(key)}: downloaded {tmp.stat().st_size} bytes (SHA-256 {digest}), storage recorded "
                    f"{size} bytes (SHA-256 {recorded})"
                )
            os.replace(tmp, local)
        except Exception as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise self._fail("cannot download", key, exc) from exc
        return Stored(self.uri(key), size, digest)

    def delete(self, key: str) -> bool:
        if not self.exists(key):  # S3 answers a delete of a missing key with success: ask first, to say so
            return False
        try:
            self._client.delete_object(Bucket=self._bucket, Key=key)
        except Exception as exc:
            raise self._fail("cannot delete", key, exc) from exc
        return True

    def delete_prefix(self, location: StorageLocation) -> int:
        """Delete every object under `location/` (never the bucket's other keys: the prefix ends with '/')."""
        prefix = location.prefix.strip("/")
        if not prefix:
            raise StorageError("refusing to delete a whole bucket")
        removed = 0
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix + "/")
            for page in pages:
                keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
                if keys:
                    self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": keys, "Quiet": True})
                    removed += len(keys)
        except Exception as exc:
            raise self._fail("cannot delete under", prefix + "/", exc) from exc
        return removed
