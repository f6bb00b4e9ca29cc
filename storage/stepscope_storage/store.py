"""The one Store protocol every component talks to, its results and its errors. Pure: no client here.

A Store is one bucket (or the local file system for file://). Keys are full object keys (absolute paths for file://),
as the contract's layout functions (stepscope_contract.storage) compute them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from stepscope_contract.storage import StorageLocation


class StorageError(RuntimeError):
    """Storage could not be listed, read, written or deleted; the message names the key and why."""


class TooLargeError(StorageError):
    """An object larger than the reader allows; nothing beyond the allowance was read."""

    def __init__(self, key: str, size: int) -> None:
        super().__init__(f"{key} holds {size} bytes")
        self.size = size


class DeadlineExceeded(StorageError):
    """A transfer still failing when its deadline passed: no further attempt was made; the message has the last
    error and the attempts."""


class ChecksumMismatch(StorageError):
    """What storage holds is not what was sent (size or SHA-256 differ)."""


@dataclass(frozen=True)
class Stored:
    """One file as it now lies in storage."""

    uri: str
    size: int
    sha256: str


DEFAULT_MULTIPART_THRESHOLD = 8 * 1024 * 1024
DEFAULT_MULTIPART_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class TransferSettings:
    """How an object store is talked to. `attempts` is per request (botocore's standard retry mode: exponential
    backoff with jitter, throttling and 5xx and connection errors retried); a multipart upload retries a part, never
    the whole file."""

    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    multipart_chunk: int = DEFAULT_MULTIPART_CHUNK
    max_concurrency: int = 4
    attempts: int = 10
    retry_mode: str = "standard"  # or "adaptive" (client-side rate limiting on throttling)
    connect_timeout: float = 5.0
    read_timeout: float = 30.0


@dataclass
class TransferCounts:
    """Requests a store sent since it was opened: `attempts` counts every try, `retries` the tries after a
    failure (per request: a multipart upload retries the failed part, not the file)."""

    calls: int = 0
    attempts: int = 0

    @property
    def retries(self) -> int:
        return max(0, self.attempts - self.calls)


class Store(Protocol):
    """What every component needs of storage; S3, OSS, MinIO and file:// implement it (and GCS would)."""

    def list_keys(self, location: StorageLocation) -> list[str]:
        """Every key under `location` (recursively), sorted; a file:// location that is a file lists itself."""
        ...

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        """The object's bytes; with `most`, TooLargeError when it is larger (or its first `most` bytes: truncate)."""
        ...

    def exists(self, key: str) -> bool: ...

    def write(self, key: str, data: bytes, content_type: str) -> str:
        """Store `data` at `key` (replacing it); its URI."""
        ...

    def put_file(self, local: Path, key: str, content_type: str, *, deadline: float | None = None) -> Stored:
        """Upload a local file (multipart above the threshold; each request retried on its own until `deadline`,
        a time.monotonic() value); checks what was stored (Content-MD5 and ETag for one PUT, size and SHA-256 for a
        multipart upload). DeadlineExceeded, ChecksumMismatch or StorageError."""
        ...

    def get_file(self, key: str, local: Path) -> Stored:
        """Download to `local` (written to a temporary name, then renamed), checked against the SHA-256 the
        uploader recorded when there is one."""
        ...

    def delete_prefix(self, location: StorageLocation) -> int:
        """Delete everything under the folder `location` (never a whole bucket); how many objects went."""
        ...

    def delete(self, key: str) -> bool:
        """Delete one object; False when there was none. StorageError when the store refuses."""
        ...

    def uri(self, key: str) -> str: ...

    @property
    def counts(self) -> TransferCounts:
        """Requests sent so far (retries included)."""
        ...
