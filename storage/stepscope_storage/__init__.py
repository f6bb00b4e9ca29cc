"""stepscope_storage: the one room that talks to object storage. Components (sidecar, analyzer, operator, CLI, local
cluster) call only this; it imports only the contract (and boto3, lazily, in `s3`).

    store = open_store(location, storage_spec_or_destination, credentials)
    store.put_file(path, rank_artifact_key(session, rank, TRACE_FILE), "application/gzip", deadline=...)

- `store`: the Store protocol (list_keys, read (bounded), exists, write, put_file (multipart), get_file,
  delete_prefix, uri), its errors and TransferSettings;
- `endpoints`: the endpoint and addressing-style rules (OSS's region -> endpoint) every component shares;
- `credentials`: the credential environment variable names and the Secret -> env mapping;
- `local` (file://) and `s3` (S3, OSS, MinIO) behind `open_store`; `fetch`: `stepscope fetch`.

Adding a backend (GCS, say) is one module plus its tests: a class with the Store methods (e.g. `gcs.py` over
google-cloud-storage, imported lazily like boto3 is in `s3.py`), one row in `BACKENDS` below, and the scheme in the
contract (`Scheme.GCS`, `gs://` in parse_storage_uri and the spec's URI pattern). Callers do not change; the
protocol tests in tests/storage/ run against every row of BACKENDS.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from stepscope_contract.storage import Scheme, StorageLocation
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials
from stepscope_storage.endpoints import EndpointSettings
from stepscope_storage.store import (
    ChecksumMismatch,
    DeadlineExceeded,
    StorageError,
    Store,
    Stored,
    TooLargeError,
    TransferCounts,
    TransferSettings,
)

MAX_ATTEMPTS_ENV = "AWS_MAX_ATTEMPTS"
"""the AWS SDKs' variable for the attempts per request; it sets TransferSettings.attempts where the caller sets none"""
MOST_ATTEMPTS = 20

Backend = Callable[[StorageLocation, EndpointSettings, Credentials | None, TransferSettings], Store]


def _local(
    location: StorageLocation, settings: EndpointSettings, credentials: Credentials | None, transfer: TransferSettings
) -> Store:
    from stepscope_storage.local import LocalStore

    return LocalStore()


def _s3(
    location: StorageLocation, settings: EndpointSettings, credentials: Credentials | None, transfer: TransferSettings
) -> Store:
    from stepscope_storage.s3 import S3Store  # boto3 is imported only here, when an object store is opened

    return S3Store(location, settings, credentials, transfer)


BACKENDS: dict[Scheme, Backend] = {Scheme.FILE: _local, Scheme.S3: _s3, Scheme.OSS: _s3}


def open_store(
    location: StorageLocation,
    settings: EndpointSettings | None = None,
    credentials: Credentials | None = None,
    transfer: TransferSettings | None = None,
) -> Store:
    """The store that holds `location`. `settings`: a StorageSpec, a StorageDestination or a Connection (endpoint,
    region, addressing style); `credentials`: None lets the provider chain decide (the environment's keys, a pod's
    identity); see Credentials.from_env."""
    backend = BACKENDS.get(location.scheme)
    if backend is None:
        raise StorageError(f"no storage backend for {location.scheme.value}://")
    return backend(location, settings or Connection(), credentials, transfer or default_transfer())


def default_transfer() -> TransferSettings:
    """TransferSettings, with the attempts per request AWS_MAX_ATTEMPTS sets (1 to MOST_ATTEMPTS) when it holds a
    whole number (botocore reads it only where the client's config sets no attempts, and ours does)."""
    value = os.environ.get(MAX_ATTEMPTS_ENV, "").strip()
    if not value.isdigit():
        return TransferSettings()
    return TransferSettings(attempts=min(max(int(value), 1), MOST_ATTEMPTS))


__all__ = [
    "BACKENDS",
    "ChecksumMismatch",
    "Connection",
    "Credentials",
    "DeadlineExceeded",
    "EndpointSettings",
    "StorageError",
    "Store",
    "Stored",
    "TooLargeError",
    "TransferCounts",
    "TransferSettings",
    "default_transfer",
    "open_store",
]
