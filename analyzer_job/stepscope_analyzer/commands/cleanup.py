"""`stepscope analyzer-job --mode delete --session-json DOC`: the cleanup Job the operator starts when a session whose
accepted spec says `storage.deleteOnSessionDelete` is deleted.

DOC is the session as the operator accepted it (SessionDocument: frozen spec, namespace, name, uid); the folder is
recomputed here from it (`<storage.uri>/<namespace>/<name>-<uid8>`), never taken from status, so no argument can
point the deletion anywhere else. No Kubernetes API is needed. Credentials
are the session's own (`credentialsSecret` as env, set by the operator). file:// folders are deleted only when
STEPSCOPE_ALLOW_FILE_DELETION=true (the operator sets it in local mode only). The session's entry in the sessions
index (`<storage.uri>/<namespace>/_sessions/<name>.json`) goes too when it still names this session, so a later
session cannot name a baseline whose report was deleted (it gets "baseline not found" instead).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from stepscope_contract.analysis_documents import SessionDocument
from stepscope_contract.session import StorageSpec
from stepscope_contract.session_folder import session_folder
from stepscope_contract.session_index import MAX_INDEX_BYTES, SessionIndexEntry, session_index_key
from stepscope_contract.storage import Scheme, StorageLocation, parse_storage_uri
from stepscope_storage import StorageError, Store, open_store
from stepscope_storage.credentials import Credentials

ENV_ALLOW_FILE_DELETION = "STEPSCOPE_ALLOW_FILE_DELETION"


class CleanupRefused(RuntimeError):
    """The session does not qualify for deletion; the message says why."""


def _open(location: StorageLocation, storage: StorageSpec) -> Store:
    """The session's store, reached as the sidecars reached it (stepscope_storage), with this Job's credentials."""
    return open_store(location, storage, Credentials.from_env())


def deletion_target(document: SessionDocument, allow_file: bool) -> tuple[StorageLocation, StorageSpec]:
    """The folder to delete and how to reach it, from the accepted session alone; CleanupRefused otherwise. Pure."""
    spec = document.spec
    if not spec.storage.delete_on_session_delete:
        raise CleanupRefused("the accepted spec keeps the artifacts (storage.deleteOnSessionDelete is false)")
    location = session_folder(spec, document.namespace, document.name, document.uid)
    if location.scheme is Scheme.FILE and not allow_file:
        raise CleanupRefused(f"{location.uri}: file:// folders are deleted only in local mode")
    return location, spec.storage


def index_entry_is_this_session(data: bytes, uid: str, folder: StorageLocation) -> bool:
    """Whether a sessions-index entry names this session (its uid and folder), not a later session that reused the
    name (whose entry must stay: it is that session's baseline address). Pure."""
    try:
        entry = SessionIndexEntry.model_validate_json(data)
    except ValueError:
        return False
    return entry.uid == uid and entry.folder == folder.uri


def _forget_index_entry(store: Store, key: str, uid: str, folder: StorageLocation, log: Callable[[str], None]) -> None:
    try:
        data = store.read(key, most=MAX_INDEX_BYTES)
    except StorageError:
        return  # no entry (never analysed, or already gone), or unreadable: nothing of ours to remove
    if index_entry_is_this_session(data, uid, folder) and store.delete(key):
        log(f"removed its sessions-index entry {store.uri(key)}")


def run_delete(
    document: SessionDocument,
    log: Callable[[str], None],
    opener: Callable[[StorageLocation, StorageSpec], Store] = _open,
) -> int:
    """Delete the session's folder and its sessions-index entry (when the entry still names this session: a baseline
    whose artifacts are gone cannot be compared with); the number of objects removed from the folder."""
    allow_file = os.environ.get(ENV_ALLOW_FILE_DELETION, "").lower() == "true"
    location, storage = deletion_target(document, allow_file)
    store = opener(location, storage)
    removed = store.delete_prefix(location)
    log(f"deleted {removed} object(s) under {location.uri}")
    key = session_index_key(parse_storage_uri(storage.uri), document.namespace, document.name)
    _forget_index_entry(store, key, document.uid, location, log)
    return removed
