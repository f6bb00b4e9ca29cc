"""Installs that a GitOps controller renders with `helm template` on every sync (Argo CD, Flux):

- rendering twice with the same values gives the same manifests: with the defaults (the operator makes the master
  token and the webhook certificate at runtime and sets the caBundle: no Secret and no caBundle rendered), with the
  master token from an existing Secret and the webhook certificate from cert-manager or from an existing Secret;
- `sidecar.token.existingSecret`: no token Secret is rendered, the operator mounts the user's Secret, is told the
  training namespaces whose token Secret it writes, and may write only that Secret there;
- `webhook.existingSecret` needs `webhook.caBundle` and renders no TLS Secret;
- `onboarding.byLabel`: the operator's ClusterRole to onboard labelled namespaces (and refused in namespaced mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from .helm_chart import CHART, RELEASE_NAMESPACE, by_kind, one, run_helm

pytestmark = pytest.mark.integration
GITOPS_VALUES = Path(__file__).resolve().parent / "gitops-values.yaml"
CERT_MANAGER = ("--set", "sidecar.token.existingSecret=stepscope-master", "--set", "webhook.certManager.enabled=true")


def _template(*args: str) -> str:
    got = run_helm("template", "stepscope", str(CHART), "--namespace", RELEASE_NAMESPACE, *args)
    assert got.returncode == 0, got.stderr
    return got.stdout


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize(
    "args", [("--values", str(GITOPS_VALUES)), CERT_MANAGER], ids=["existing-secrets", "cert-manager"]
)
def test_two_renders_with_the_same_values_are_the_same(args: tuple[str, ...]) -> None:
    first, second = _template(*args), _template(*args)
    assert first == second
    for doc in _docs(first):
        if doc["kind"] not in ("Certificate", "Issuer"):
            kubernetes_validate.validate(doc, "1.32", strict=True)


def test_two_default_renders_are_the_same_and_hold_no_secret() -> None:
    first, second = _template(), _template()
    assert first == second
    docs = _docs(first)
    assert not by_kind(docs, "Secret")  # the master token and the webhook certificate are made at runtime
    assert all("caBundle" not in h["clientConfig"] for h in one(docs, "MutatingWebhookConfiguration")["webhooks"])
    env = {
        e["name"]: e.get("value") for e in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["STEPSCOPE_SIDECAR_MASTER_SECRET"] == "stepscope-sidecar-master"
    assert env["STEPSCOPE_WEBHOOK_TLS_SECRET"] == "stepscope-webhook-tls"
    assert env["STEPSCOPE_WEBHOOK_CONFIGURATION"] == "stepscope-sidecar-injector"
    assert env["STEPSCOPE_ONBOARD_NAMESPACES"] == RELEASE_NAMESPACE  # the training namespace's token, written by it


def test_an_existing_master_renders_no_token_secret_and_the_operator_writes_them() -> None:
    docs = _docs(_template("--values", str(GITOPS_VALUES)))
    assert not [d for d in by_kind(docs, "Secret")]  # neither tokens nor TLS: both are the user's
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["STEPSCOPE_ONBOARD_NAMESPACES"] == "team-a,team-b"
    assert env["STEPSCOPE_ONBOARD_LABEL"] == "true"
    assert "STEPSCOPE_ONBOARD_ANALYZER_ROLE" not in env  # the analyzer needs no RBAC: nothing to bind
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    assert secrets == {"sidecar-token": "stepscope-master", "webhook-tls": "stepscope-webhook-cert"}
    hooks = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert {h["clientConfig"]["caBundle"] for h in hooks} == {
        yaml.safe_load(GITOPS_VALUES.read_text())["webhook"]["caBundle"]
    }
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in by_kind(docs, "Role")}
    for ns in ("team-a", "team-b"):
        rules = roles[(ns, "stepscope-sidecar-token")]["rules"]
        assert rules == [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": ["stepscope-sidecar-token"],
                "verbs": ["get", "patch"],
            },
        ]
    onboarding = one(docs, "ClusterRole", "-onboarding")["rules"]
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]} in onboarding
    assert not [r for r in onboarding if "rbac.authorization.k8s.io" in r["apiGroups"]]  # nothing to bind or grant
    binding = one(docs, "ClusterRoleBinding", "-onboarding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "stepscope-operator", "namespace": RELEASE_NAMESPACE}
    ]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("webhook.existingSecret=cert",), "webhook.caBundle"),
        (("onboarding.byLabel=true", "operator.watchNamespaces={team-a}"), "onboarding.byLabel needs an operator"),
    ],
)
def test_incomplete_values_are_refused(sets: tuple[str, ...], message: str) -> None:
    args = [a for s in sets for a in ("--set", s)]
    got = run_helm("template", "stepscope", str(CHART), "--namespace", RELEASE_NAMESPACE, *args)
    assert got.returncode != 0 and message in got.stderr, got.stderr
