"""SHA-256 of files and bytes: what a manifest records and what stores check after a transfer."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20
METADATA_KEY = "sha256"  # user metadata (x-amz-meta-sha256) an upload carries, checked on download


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
