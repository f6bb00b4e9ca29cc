"""The sessions index: one small JSON per analysed session, `<storage.uri>/<namespace>/_sessions/<name>.json`.

The analyzer Job writes it after the report, so a later session can name this one as its baseline
(`spec.baseline.session`) even after the ProfileSession was deleted (its TTL, a pipeline's cleanup): the resource
does not outlive the run, the storage does. A name used again points at its latest analysed session. The folder name
cannot collide with a session's folder (`<name>-<uid8>`: DNS names hold no underscore). Pure.
"""

from datetime import datetime
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

from stepscope_contract.storage import StorageLocation, sanitize_segment

SESSIONS_DIR: Final = "_sessions"
INDEX_SCHEMA_VERSION: Final = 1
MAX_INDEX_BYTES: Final = 64 * 1024


class SessionIndexEntry(BaseModel):
    """What a later session needs to find this one's report (and what a person listing the index reads)."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = INDEX_SCHEMA_VERSION
    namespace: Annotated[str, Field(max_length=253)]
    name: Annotated[str, Field(max_length=253)]
    uid: Annotated[str, Field(max_length=64)] = ""
    folder: Annotated[str, Field(max_length=2048)] = Field(description="the session's storage folder")
    report_json: Annotated[str, Field(max_length=2048)] = Field(description="its report/report.json")
    analysed_at: datetime
    verdict: Annotated[str, Field(max_length=1024)] = ""
    median_step_ms: float | None = None


def sessions_index(base: StorageLocation, namespace: str) -> StorageLocation:
    """`<base>/<namespace>/_sessions`, next to the namespace's session folders."""
    return base.child(namespace, SESSIONS_DIR)


def session_index_key(base: StorageLocation, namespace: str, name: str) -> str:
    """The key of `name`'s entry; every segment sanitised (no traversal from a name)."""
    return sessions_index(base, namespace).key(f"{sanitize_segment(name)}.json")
