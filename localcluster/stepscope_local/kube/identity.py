"""Who made which request: bearer tokens mapped to Kubernetes user names, and an audit log of resource requests.

The emulator authorises nothing (a fidelity gap), but it records every resource request with the identity of its
bearer token, so tests can check real traffic against the RBAC the Helm chart grants: the operator, the analyzer Job
and the training pods (sidecars) each get their own token and kubeconfig (`EmulatorServer.kubeconfig_for`, and the
runner hands each pod the kubeconfig of its ServiceAccount). Discovery (`/api`, `/apis/...`) is not recorded: every
authenticated user may read it (the `system:discovery` ClusterRole).
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

ADMIN_USER = "system:admin"
ADMIN_TOKEN = "stepscope-local"  # noqa: S105 - the default kubeconfig's token (kubectl, tests)
ANONYMOUS = "system:anonymous"
MAX_RECORDS = 200_000


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


@dataclass(frozen=True)
class Request:
    """One resource request, in RBAC's terms."""

    user: str
    verb: str  # get list watch create update patch delete deletecollection
    group: str
    resource: str  # plural, with "/subresource" when there is one
    namespace: str | None
    name: str | None


def verb_of(method: str, name: str | None, query: Mapping[str, str]) -> str:
    method = method.upper()
    if method == "GET":
        if query.get("watch", "").lower() in ("true", "1"):
            return "watch"
        return "get" if name else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


class Identities:
    """Bearer token -> user name; a token per user, made on demand."""

    def __init__(self) -> None:
        self._users: dict[str, str] = {ADMIN_TOKEN: ADMIN_USER}
        self._lock = threading.Lock()

    def token_for(self, user: str) -> str:
        token = "local-" + hashlib.sha256(user.encode()).hexdigest()[:32]
        with self._lock:
            self._users[token] = user
        return token

    def user_of(self, authorization: str | None) -> str:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return ANONYMOUS
        with self._lock:
            return self._users.get(token.strip(), ANONYMOUS)


class AuditLog:
    """The most recent MAX_RECORDS resource requests, thread-safe."""

    def __init__(self, identities: Identities) -> None:
        self.identities = identities
        self._records: deque[Request] = deque(maxlen=MAX_RECORDS)
        self._lock = threading.Lock()

    def record(  # noqa: PLR0917
        self,
        authorization: str | None,
        method: str,
        query: Mapping[str, str],
        group: str,
        resource: str,
        subresource: str | None,
        namespace: str | None,
        name: str | None,
    ) -> None:
        request = Request(
            user=self.identities.user_of(authorization),
            verb=verb_of(method, name, query),
            group=group,
            resource=f"{resource}/{subresource}" if subresource else resource,
            namespace=namespace,
            name=name,
        )
        with self._lock:
            self._records.append(request)

    def requests(self, user: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self._records if user is None or r.user == user]

    def users(self) -> set[str]:
        with self._lock:
            return {r.user for r in self._records}
