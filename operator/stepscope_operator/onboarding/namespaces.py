"""Onboarding a training namespace without hand work: what the operator writes there, as pure data.

A namespace labelled `stepscope.dev/profiling: enabled` (cluster-wide operators only, `STEPSCOPE_ONBOARD_LABEL=true`)
gets what a Helm install writes into each of its `trainingNamespaces`:
- the sidecar token Secret (`STEPSCOPE_SIDECAR_TOKEN_SECRET`, key `token`): the token derived for that namespace
  from the operator's master (stepscope_contract.tokens), so a team's Secret opens only its own sidecars;
- the analyzer's ServiceAccount (`STEPSCOPE_ANALYZER_SERVICE_ACCOUNT`), which the analyzer and cleanup Jobs run
  under: no RoleBinding and no API token, since those Jobs read and write storage only.
Namespaces listed in `STEPSCOPE_ONBOARD_NAMESPACES` get the token Secret at every start: the Helm chart lists its
training namespaces there when the master comes from an existing Secret (`sidecar.token.existingSecret`), whose
value a render (`helm template`, Argo CD, Flux) cannot read. Storage credentials are never copied: a session names
its team's own Secret (`spec.storage.credentialsSecret`), else the install's default name
(`STEPSCOPE_STORAGE_CREDENTIALS_SECRET`) is looked up in the session's namespace; `stepscope check -n TEAM` says
which of these a namespace lacks.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stepscope_contract.constants import (
    DEFAULT_ANALYZER_ACCOUNT,
    DEFAULT_TOKEN_SECRET,
)
from stepscope_contract.constants import (
    ONBOARDING_LABEL as LABEL,
)
from stepscope_contract.constants import (
    ONBOARDING_LABEL_VALUE as LABEL_VALUE,
)
from stepscope_contract.tokens import namespace_token

__all__ = ["DEFAULT_ANALYZER_ACCOUNT", "DEFAULT_TOKEN_SECRET", "LABEL", "LABEL_VALUE"]

MANAGED_BY = {"app.kubernetes.io/part-of": "stepscope", "app.kubernetes.io/managed-by": "stepscope-operator"}


@dataclass(frozen=True)
class OnboardingSettings:
    by_label: bool = False
    listed: tuple[str, ...] = ()
    token_secret: str = DEFAULT_TOKEN_SECRET
    analyzer_account: str = DEFAULT_ANALYZER_ACCOUNT

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OnboardingSettings:
        listed = tuple(n.strip() for n in env.get("STEPSCOPE_ONBOARD_NAMESPACES", "").split(",") if n.strip())
        return cls(
            by_label=env.get("STEPSCOPE_ONBOARD_LABEL", "").strip().lower() in ("1", "true", "yes"),
            listed=listed,
            token_secret=env.get("STEPSCOPE_SIDECAR_TOKEN_SECRET") or DEFAULT_TOKEN_SECRET,
            analyzer_account=env.get("STEPSCOPE_ANALYZER_SERVICE_ACCOUNT") or DEFAULT_ANALYZER_ACCOUNT,
        )


def wants_onboarding(labels: Mapping[str, str] | None) -> bool:
    return (labels or {}).get(LABEL) == LABEL_VALUE


def token_secret(namespace: str, master: str, settings: OnboardingSettings) -> dict[str, Any]:
    token = namespace_token(master, namespace)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": settings.token_secret,
            "namespace": namespace,
            "labels": {**MANAGED_BY, "app.kubernetes.io/component": "sidecar"},
        },
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


def analyzer_account(namespace: str, settings: OnboardingSettings) -> dict[str, Any]:
    """The analyzer Jobs' ServiceAccount: no rights on the API, so no token is mounted."""
    labels = {**MANAGED_BY, "app.kubernetes.io/component": "analyzer"}
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": settings.analyzer_account, "namespace": namespace, "labels": labels},
        "automountServiceAccountToken": False,
    }


def team_objects(namespace: str, master: str, settings: OnboardingSettings) -> list[dict[str, Any]]:
    """Everything a labelled namespace gets, the token Secret first."""
    return [token_secret(namespace, master, settings), analyzer_account(namespace, settings)]


def refusal(obj: Mapping[str, Any], settings: OnboardingSettings) -> str | None:
    """Why the operator must not write `obj` (None: it may): only the Opaque token Secret and the analyzer's
    ServiceAccount, whatever asks. The chart's ValidatingAdmissionPolicy holds the API server to the same, since
    RBAC cannot restrict `create` by name or a Secret's type."""
    kind, name = obj.get("kind"), (obj.get("metadata") or {}).get("name")
    if kind == "Secret" and (obj.get("type") != "Opaque" or name != settings.token_secret):
        return f"only the Opaque Secret {settings.token_secret} is written, not a {obj.get('type')} Secret {name}"
    if kind == "ServiceAccount" and name != settings.analyzer_account:
        return f"only the ServiceAccount {settings.analyzer_account} is created, not {name}"
    if kind not in ("Secret", "ServiceAccount"):
        return f"a {kind} is never written"
    return None


def collection_path(obj: Mapping[str, Any]) -> str:
    """The REST collection an object is created in."""
    plural = {"Secret": "secrets", "ServiceAccount": "serviceaccounts"}[obj["kind"]]
    prefix = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    return f"{prefix}/namespaces/{obj['metadata']['namespace']}/{plural}"


def stale_secret_patch(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that gives an existing Secret the wanted token (a master rotated), or None when it has it."""
    if (existing.get("data") or {}).get("token") == wanted["data"]["token"]:
        return None
    return {"data": {"token": wanted["data"]["token"]}}
