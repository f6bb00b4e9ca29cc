"""Per-namespace sidecar tokens, derived from one master secret.

The sidecars of namespace N accept only `namespace_token(master, N)`; the operator holds the master and derives the
token of the namespace it talks to, so a token read from one namespace's Secret opens no other namespace's
sidecars. The Helm chart computes the same value (`sha256sum` of the same text) to write each namespace's Secret,
which is why the derivation is a keyed hash Helm can express rather than an HMAC (docs/security.md says why the
secret goes last and why length extension gives an attacker nothing here).
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

TOKEN_DERIVATION: Final = "stepscope-sidecar-token/v1"  # noqa: S105 - a label of the derivation
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def namespace_token(master: str, namespace: str) -> str:
    """The bearer token of the sidecars in `namespace`: hex SHA-256 of '<derivation>:<namespace>:<master>'."""
    if not master:
        raise ValueError("the master token is empty")
    if not _NAMESPACE.match(namespace):
        raise ValueError(f"{namespace!r} is not a namespace name (DNS label)")
    return hashlib.sha256(f"{TOKEN_DERIVATION}:{namespace}:{master}".encode()).hexdigest()
