"""`stepscope check`'s `team` row: does the training namespace hold what its sessions need, and if not, what to do.

A namespace is ready for sessions when it has
- the sidecar token Secret (key `token`): written by the chart for `trainingNamespaces`, or by the operator for a
  namespace labelled `stepscope.dev/profiling=enabled` (onboarding.py); found by its labels
  (`app.kubernetes.io/part-of=stepscope,app.kubernetes.io/component=sidecar`), else by the default name;
- the analyzer's ServiceAccount, which the analyzer Job runs as (found the same way, component `analyzer`);
- the storage credentials Secret the install names by default, unless sessions name their own
  (`spec.storage.credentialsSecret`): a missing default is reported, with that alternative.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stepscope_cli.commands.check_report import CheckResult, fail, ok, skip
from stepscope_contract.constants import DEFAULT_ANALYZER_ACCOUNT, DEFAULT_TOKEN_SECRET
from stepscope_contract.constants import ONBOARDING_LABEL as LABEL
from stepscope_contract.constants import ONBOARDING_LABEL_VALUE as LABEL_VALUE

Call = Callable[..., tuple[int, Any]]  # Cluster.call: (method, path, body=None, query=None) -> (status, JSON)
PART_OF = "app.kubernetes.io/part-of=stepscope"
ONBOARD_FIX = (
    f"label the namespace {LABEL}={LABEL_VALUE} (Helm onboarding.byLabel=true) or add it to the chart's "
    "trainingNamespaces"
)


def _find(call: Call, namespace: str, plural: str, component: str, default: str) -> tuple[str | None, int]:
    """(the name of the stepscope object of that component in the namespace, or None; the HTTP status of the list)."""
    query = {"labelSelector": f"{PART_OF},app.kubernetes.io/component={component}"}
    code, listed = call("GET", f"/api/v1/namespaces/{namespace}/{plural}", query=query)
    items = ((listed or {}).get("items") or []) if code == 200 else []
    if plural == "secrets":
        items = [i for i in items if "token" in (i.get("data") or {})]
    if items:
        return str(items[0]["metadata"]["name"]), code
    got, _ = call("GET", f"/api/v1/namespaces/{namespace}/{plural}/{default}")
    return (default if got == 200 else None), code


def check_team(call: Call, namespace: str, credentials_secret: str) -> CheckResult:
    token, code = _find(call, namespace, "secrets", "sidecar", DEFAULT_TOKEN_SECRET)
    if code in (401, 403):
        return skip("team", f"cannot list Secrets in namespace {namespace} ({code}): nothing to say about it")
    account, _ = _find(call, namespace, "serviceaccounts", "analyzer", DEFAULT_ANALYZER_ACCOUNT)
    missing, fixes = [], []
    if token is None:
        missing.append("the sidecar token Secret")
    if account is None:
        missing.append(f"the analyzer ServiceAccount ({DEFAULT_ANALYZER_ACCOUNT})")
    if missing:
        fixes.append(ONBOARD_FIX)
    credentials = "sessions' own spec.storage.credentialsSecret (no default configured)"
    if credentials_secret:
        got, _ = call("GET", f"/api/v1/namespaces/{namespace}/secrets/{credentials_secret}")
        if got == 200:
            credentials = f"Secret {credentials_secret}"
        else:
            missing.append(f"the storage credentials Secret {credentials_secret}")
            fixes.append(
                f"create it (kubectl -n {namespace} create secret generic {credentials_secret} "
                "--from-literal=AWS_ACCESS_KEY_ID=... --from-literal=AWS_SECRET_ACCESS_KEY=...) or name the team's "
                "own Secret in each session's spec.storage.credentialsSecret"
            )
    if missing:
        return fail("team", f"namespace {namespace} lacks {', '.join(missing)}: {'; '.join(fixes)}")
    found = f"token Secret {token}, ServiceAccount {account}, credentials {credentials}"
    return ok("team", f"namespace {namespace}: {found}")
