"""The session as the operator accepted it (session.json, written by the analyzer Job at a session folder's top), as
`stepscope analyze` reads it: the session's capture id binds the ranks' node summaries, its identity and spec go
into the report."""

from __future__ import annotations

from stepscope_analyzer.ranks.storage_io import StorageError, StorageUriError, Store, location_of
from stepscope_contract.analysis_documents import MAX_SESSION_DOCUMENT_BYTES, SessionDocument
from stepscope_contract.storage import SESSION_FILE


def session_document(store: Store, source: str) -> SessionDocument | None:
    """The session.json of a session folder (None: not one the analyzer Job wrote, or unreadable)."""
    try:
        data = store.read(location_of(source).key(SESSION_FILE), most=MAX_SESSION_DOCUMENT_BYTES)
        return SessionDocument.from_json(data)
    except (StorageError, StorageUriError, ValueError):
        return None
