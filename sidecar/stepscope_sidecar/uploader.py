"""Uploads one rank's files with checksums, retries and a deadline; the manifest goes last."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stepscope_sidecar.retry import Backoff, describe, is_retryable
from stepscope_sidecar.stores import Store

log = logging.getLogger(__name__)

CONTENT_TYPES = {
    ".gz": "application/gzip",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}


DEFAULT_BACKOFF = Backoff()


class UploadError(RuntimeError):
    """An upload that will not succeed: the message has the last error and the attempt count."""


def content_type(name: str) -> str:
    return CONTENT_TYPES.get(Path(name).suffix, "application/octet-stream")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class UploadStats:
    attempts: int = 0
    retries: int = 0
    bytes: int = 0
    errors: list[str] = field(default_factory=list)


def put_with_retry(
    store: Store,
    local: Path,
    key: str,
    *,
    deadline: float,
    stats: UploadStats,
    backoff: Backoff = DEFAULT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Upload and confirm (size check against the store); retry transient errors until the deadline."""
    size = local.stat().st_size
    attempt = 0
    while True:
        stats.attempts += 1
        try:
            store.put(local, key, content_type(local.name))
            if not store.confirm(key, size):
                raise UploadError(f"{key}: stored size differs from {size} bytes")
            stats.bytes += size
            return
        except Exception as exc:
            reason = describe(exc)
            retryable = is_retryable(exc)
            delay = backoff.delay(attempt)
            attempt += 1
            if not retryable or attempt >= backoff.max_attempts or clock() + delay > deadline:
                why = "not retryable" if not retryable else "out of retries/time"
                raise UploadError(
                    f"upload of {local.name} failed after {attempt} attempt(s) ({why}): {reason}"
                ) from exc
            stats.retries += 1
            log.warning("upload of %s failed (%s); retry %d in %.2fs", local.name, reason, attempt, delay)
            sleep(delay)
