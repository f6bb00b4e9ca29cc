"""The analyzer's side of storage: stepscope_storage's stores, read within the analyzer's named limits.

Stores come from stepscope_storage.open_store (s3://, oss://, file:// or a local path); credentials from the
standard environment variables (stepscope_storage.credentials, set from the session's Secret), else the provider
chain. `read_bounded` is how every input is read: beyond its limit, an error that names the limit.
"""

from __future__ import annotations

from pathlib import Path

from stepscope_contract.storage import Scheme, StorageLocation, StorageUriError, parse_storage_uri
from stepscope_storage import StorageError, Store, TooLargeError, open_store
from stepscope_storage.connection import Connection
from stepscope_storage.local import LocalStore


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


__all__ = [
    "Connection",
    "LocalStore",
    "StorageError",
    "StorageLocation",
    "StorageUriError",
    "Store",
    "TooLargeError",
    "location_of",
    "open_store",
    "read_bounded",
]
