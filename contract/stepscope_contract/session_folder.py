"""A session's storage folder, computed from first principles: the accepted (frozen) spec plus the namespace, name
and uid of the object. Pure.

Everything that writes to or deletes from a session's folder (operator, sidecars, analyzer, cleanup Job) computes it
here; nothing takes it from `status.artifactsUri`, which is informative only (the analyzer's ServiceAccount can
patch status)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from stepscope_contract.constants import ACCEPTED_SPEC_ANNOTATION
from stepscope_contract.session import ProfileSessionSpec, StorageSpec
from stepscope_contract.storage import StorageLocation, parse_storage_uri, session_location

MAX_ACCEPTED_SPEC_CHARS = 64 * 1024


def accepted_spec(metadata: Mapping[str, Any]) -> ProfileSessionSpec | None:
    """The spec frozen in the accepted-spec annotation; None when the session was never accepted or it is unusable."""
    text = (metadata.get("annotations") or {}).get(ACCEPTED_SPEC_ANNOTATION)
    if not isinstance(text, str) or not text or len(text) > MAX_ACCEPTED_SPEC_CHARS:
        return None
    try:
        return ProfileSessionSpec.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        return None


def session_folder(spec: ProfileSessionSpec, namespace: str, name: str, uid: str) -> StorageLocation:
    """`<spec.storage.uri>/<namespace>/<name>-<uid8>` with every segment sanitised."""
    return session_location(parse_storage_uri(spec.storage.uri), namespace, name, uid)


def link_url(uri: str, storage: StorageSpec) -> str:
    """Where a person opens `uri` (an object under `storage.uri`): under `storage.urlBase` when it is set, each
    path segment percent-encoded; otherwise `uri` itself."""
    base = storage.uri.rstrip("/")
    if not storage.url_base or not uri.startswith(base + "/"):
        return uri
    rest = uri[len(base) + 1 :]
    return storage.url_base.rstrip("/") + "/" + "/".join(quote(part, safe="") for part in rest.split("/"))
