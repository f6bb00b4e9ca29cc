"""Reading traces and writing reports: a local folder, file://, s3:// or oss:// (boto3 with endpoint_url,
region and addressing style). Keys and layout come only from stepscope_contract.storage.

Credentials for s3:// and oss:// come from the standard AWS environment variables (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); when those are absent, boto3's own chain applies (a pod's
web identity, for example). Nothing is read from command-line flags.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from stepscope_contract.session import AddressingStyle
from stepscope_contract.storage import Scheme, StorageLocation, StorageUriError, parse_storage_uri


class StorageError(RuntimeError):
    """Storage could not be read or written; the message names the key and why."""


class TooLargeError(StorageError):
    """An object larger than the reader allows; nothing beyond the allowance was read."""

    def __init__(self, key: str, size: int) -> None:
        super().__init__(f"{key} holds {size} bytes")
        self.size = size


@dataclass(frozen=True)
class StorageOptions:
    endpoint: str | None = None
    region: str | None = None
    addressing_style: AddressingStyle = AddressingStyle.AUTO


class Store(Protocol):
    """One bucket (or the local file system). Keys are full keys (absolute paths for file://)."""

    def list_keys(self, location: StorageLocation) -> list[str]: ...

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        """The object's bytes; with `most`, TooLargeError when it is larger (or its first `most` bytes: truncate)."""
        ...

    def exists(self, key: str) -> bool: ...

    def write(self, key: str, data: bytes, content_type: str) -> str: ...

    def uri(self, key: str) -> str: ...

    def delete_prefix(self, location: StorageLocation) -> int: ...


class LocalStore:
    def list_keys(self, location: StorageLocation) -> list[str]:
        root = Path(location.prefix)
        if root.is_file():
            return [str(root)]
        if not root.is_dir():
            raise StorageError(f"{root} is not a folder or a file")
        return sorted(str(p) for p in root.rglob("*") if p.is_file())

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        try:
            path = Path(key)
            if most is None:
                return path.read_bytes()
            size = path.stat().st_size
            if size > most and not truncate:
                raise TooLargeError(key, size)
            with path.open("rb") as fh:
                return fh.read(most)
        except OSError as exc:
            raise StorageError(f"cannot read {key}: {exc.strerror or exc}") from exc

    def exists(self, key: str) -> bool:
        return Path(key).is_file()

    def write(self, key: str, data: bytes, content_type: str) -> str:
        path = Path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        return self.uri(key)

    def uri(self, key: str) -> str:
        return f"file://{key}"

    def delete_prefix(self, location: StorageLocation) -> int:
        """Remove the folder `location` and everything in it (symbolic links are removed, never followed)."""
        root = Path(location.prefix)
        if root.is_symlink() or not root.is_dir():
            return 0
        count = 0
        for folder, dirs, files in os.walk(root, topdown=False, followlinks=False):
            for name in files + [d for d in dirs if (Path(folder) / d).is_symlink()]:
                (Path(folder) / name).unlink()
                count += 1
            for name in dirs:
                path = Path(folder) / name
                if not path.is_symlink():
                    path.rmdir()
        root.rmdir()
        return count


class ObjectStore:
    """S3 or an S3-compatible store (OSS, MinIO) through boto3."""

    def __init__(self, scheme: Scheme, bucket: str, options: StorageOptions) -> None:
        import boto3
        from botocore.config import Config

        if scheme is Scheme.OSS and not options.endpoint:
            raise StorageError("oss:// needs an endpoint (--endpoint or spec.storage.endpoint)")
        style = options.addressing_style.value
        if scheme is Scheme.OSS and options.addressing_style is AddressingStyle.AUTO:
            style = "virtual"  # OSS serves virtual-hosted style only
        kwargs: dict[str, Any] = {
            "endpoint_url": options.endpoint,
            "region_name": options.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
            "config": Config(
                s3={"addressing_style": style}, retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10
            ),
        }
        if os.environ.get("AWS_ACCESS_KEY_ID"):
            kwargs["aws_access_key_id"] = os.environ["AWS_ACCESS_KEY_ID"]
            kwargs["aws_secret_access_key"] = os.environ.get("AWS_SECRET_ACCESS_KEY")
            kwargs["aws_session_token"] = os.environ.get("AWS_SESSION_TOKEN")
        self._client = boto3.client("s3", **kwargs)
        self._scheme = scheme
        self._bucket = bucket

    def _fail(self, what: str, key: str, exc: Exception) -> StorageError:
        return StorageError(f"{what} {self._scheme.value}://{self._bucket}/{key}: {exc}")

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
            if most is not None and size > most and not truncate:
                response["Body"].close()
                raise TooLargeError(key, size)
            body = response["Body"]
            return bytes(body.read() if most is None else body.read(most))
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
            self._client.put_object(Bucket=self._bucket, Key=key, Body=data, ContentType=content_type)
        except Exception as exc:
            raise self._fail("cannot write", key, exc) from exc
        return self.uri(key)

    def uri(self, key: str) -> str:
        return f"{self._scheme.value}://{self._bucket}/{key}"

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


def read_bounded(store: Store, key: str, limit: str, truncate: bool = False) -> bytes:
    """`store.read` within the analyzer's limit named `limit` (limits.Limits): beyond it, a LimitExceededError that
    names the limit (or, with `truncate`, only the first bytes up to it)."""
    from stepscope_analyzer import limits

    table = limits.current()
    try:
        return store.read(key, most=int(getattr(table, limit)), truncate=truncate)
    except TooLargeError as exc:
        raise table.exceeded(limit, str(exc)) from exc


def location_of(source: str) -> StorageLocation:
    """A URI (file://, s3://, oss://) or a local path (relative paths resolve against the working folder)."""
    if "://" in source:
        return parse_storage_uri(source)
    path = Path(source).expanduser().resolve()
    return StorageLocation(Scheme.FILE, "", str(path))


def open_store(location: StorageLocation, options: StorageOptions | None = None) -> Store:
    if location.scheme is Scheme.FILE:
        return LocalStore()
    return ObjectStore(location.scheme, location.bucket, options or StorageOptions())


__all__ = [
    "LocalStore",
    "ObjectStore",
    "StorageError",
    "StorageLocation",
    "StorageOptions",
    "StorageUriError",
    "Store",
    "TooLargeError",
    "location_of",
    "open_store",
    "read_bounded",
]
