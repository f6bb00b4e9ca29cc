"""Storage credentials: the environment variable names (the one place that spells them) and how a Secret's keys
become a container's environment.

Keys come only from a Kubernetes Secret, as `secretKeyRef` env of the container that needs them (sidecar,
analyzer Job, cleanup Job); never from a request, a flag or status. Without them, boto3's own chain applies (a pod's
web identity, an instance profile).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

ENV_ACCESS_KEY_ID: Final = "AWS_ACCESS_KEY_ID"
ENV_SECRET_ACCESS_KEY: Final = "AWS_SECRET_ACCESS_KEY"  # noqa: S105 - a variable name
ENV_SESSION_TOKEN: Final = "AWS_SESSION_TOKEN"  # noqa: S105 - a variable name
ENV_REGION: Final = "AWS_REGION"
ENV_DEFAULT_REGION: Final = "AWS_DEFAULT_REGION"


@dataclass(frozen=True, repr=False)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __repr__(self) -> str:  # never print a secret
        return f"Credentials(access_key_id={self.access_key_id[:4]}…)"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials | None:
        """The keys in the environment (from the Secret), or None: the provider chain decides."""
        e = os.environ if env is None else env
        key = e.get(ENV_ACCESS_KEY_ID)
        if not key:
            return None
        return cls(key, e.get(ENV_SECRET_ACCESS_KEY, ""), e.get(ENV_SESSION_TOKEN) or None)


def secret_env(
    secret: str, access_key_id_key: str, secret_access_key_key: str, *, optional: bool = False
) -> list[dict[str, Any]]:
    """Container env entries that carry a Secret's keys (secretKeyRef; the reader of the manifest never sees them).
    `optional`: a missing Secret does not keep the container from starting."""
    entries = []
    for name, key in ((ENV_ACCESS_KEY_ID, access_key_id_key), (ENV_SECRET_ACCESS_KEY, secret_access_key_key)):
        ref: dict[str, Any] = {"name": secret, "key": key}
        if optional:
            ref["optional"] = True
        entries.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
    return entries
