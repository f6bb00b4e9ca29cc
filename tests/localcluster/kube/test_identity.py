"""The emulator records which identity made which request: each kubeconfig's token maps to its user, verbs are
RBAC's, discovery is not recorded, and the runner gives each pod the kubeconfig of its ServiceAccount."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import yaml

from stepscope_local.kube import EmulatorServer
from stepscope_local.kube.identity import ADMIN_USER, ANONYMOUS, service_account_user, verb_of

pytestmark = pytest.mark.integration


def _token(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


def _call(url: str, token: str | None, method: str = "GET", body: object = None) -> int:
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return int(resp.status)


def test_requests_are_recorded_with_the_identity_of_their_token(tmp_path: Path) -> None:
    with EmulatorServer(workdir=tmp_path) as api:
        operator = service_account_user("stepscope-system", "stepscope-operator")
        token = _token(api.kubeconfig_for(operator))
        assert _token(api.kubeconfig_for(operator)) == token != _token(api.kubeconfig_path)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
        assert _call(f"{api.url}/api/v1/namespaces/ns/pods", token, "POST", pod) == 201
        assert _call(f"{api.url}/api/v1/namespaces/ns/pods?labelSelector=a%3Db", token) == 200
        assert _call(f"{api.url}/api/v1/namespaces/ns/pods/p", _token(api.kubeconfig_path)) == 200
        assert _call(f"{api.url}/api/v1/pods", None) == 200
        assert _call(f"{api.url}/apis", token) == 200  # discovery: not recorded
        recorded = [(r.user, r.verb, r.resource, r.namespace, r.name) for r in api.audit.requests()]
        assert recorded == [
            (operator, "create", "pods", "ns", None),
            (operator, "list", "pods", "ns", None),
            (ADMIN_USER, "get", "pods", "ns", "p"),
            (ANONYMOUS, "list", "pods", None, None),
        ]


def test_verbs_are_rbacs() -> None:
    assert verb_of("GET", None, {"watch": "true"}) == "watch"
    assert (verb_of("GET", "x", {}), verb_of("GET", None, {})) == ("get", "list")
    assert (verb_of("POST", None, {}), verb_of("PUT", "x", {}), verb_of("PATCH", "x", {})) == (
        "create",
        "update",
        "patch",
    )
    assert (verb_of("DELETE", "x", {}), verb_of("DELETE", None, {})) == ("delete", "deletecollection")
