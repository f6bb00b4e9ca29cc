"""Least privilege, read from the rendered chart: the exact rules each account gets, no wildcard anywhere, Secrets
read or patched only by name (and created only under the ValidatingAdmissionPolicy that holds them to the
operator's own names and types), namespaced Roles when namespaces are watched (then nothing cluster-wide but the
webhook configuration's caBundle, by name) and ClusterRoles only otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from helm_chart import CI_VALUES, RELEASE_NAMESPACE, Rule, by_kind, grants, render, rules_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

VALUE_SETS = {"default": (), "ci": (CI_VALUES,)}
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")

# exactly what the operator's requests need (tests/e2e/test_rbac_traffic.py checks them against real traffic)
OPERATOR_RULES: set[Rule] = {
    *{("stepscope.dev", "profilesessions", v) for v in ("get", "list", "watch", "patch", "create", "delete")},
    ("stepscope.dev", "profilesessions/status", "patch"),
    ("stepscope.dev", "profilesessions/finalizers", "update"),
    *{("stepscope.dev", "profiletriggers", v) for v in ("list", "watch", "patch")},
    ("stepscope.dev", "profiletriggers/status", "patch"),
    ("stepscope.dev", "profiletriggers/finalizers", "update"),
    ("", "pods", "list"),
    ("batch", "jobs", "create"),
    ("batch", "jobs", "get"),
    ("", "events", "create"),
    ("trainer.kubeflow.org", "trainjobs", "get"),
    ("jobset.x-k8s.io", "jobsets", "get"),
}


def _flatten(role: dict[str, Any]) -> set[Rule]:
    return rules_of(role)


def _roles(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in ROLE_KINDS]


_grants = grants


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_no_wildcards_and_no_secret_access(values: str) -> None:
    docs = render(*VALUE_SETS[values])
    assert _roles(docs)
    for role in _roles(docs):
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert all("*" not in item for item in rule[key]), (role["metadata"]["name"], rule)
        for _group, resource, verb in _flatten(role):
            if resource.startswith("secrets"):  # by name ("secrets:<names>"), or create under the policy
                assert resource.startswith("secrets:") or verb == "create", (role["metadata"]["name"], verb)
                assert resource != "secrets" or by_kind(docs, "ValidatingAdmissionPolicy")
                assert verb in {"create", "get", "patch"}
            assert verb not in {"escalate", "bind", "impersonate"}


def test_cluster_wide_operator_gets_cluster_roles_with_exactly_its_handlers_needs() -> None:
    docs = render(
        sets=("sidecar.token.value=0123456789abcdef", "webhook.certManager.enabled=true")
    )  # no secret of its own to make
    grants = _grants(docs, "stepscope-operator", RELEASE_NAMESPACE)
    assert grants == {("cluster", None): OPERATOR_RULES}
    assert not by_kind(docs, "Role")


def test_by_default_the_operator_may_make_only_its_own_secrets_and_set_its_caBundle() -> None:
    grants = _grants(render(), "stepscope-operator", RELEASE_NAMESPACE)
    webhook = "mutatingwebhookconfigurations:stepscope-sidecar-injector"
    assert grants[("cluster", None)] == OPERATOR_RULES | {("admissionregistration.k8s.io", webhook, v)
                                                          for v in ("get", "patch")}  # fmt: skip
    assert grants[("namespace", RELEASE_NAMESPACE)] == {
        ("", "secrets", "create"),  # held to these names and types by the ValidatingAdmissionPolicy
        ("", "secrets:stepscope-sidecar-master,stepscope-webhook-tls", "get"),  # the install's (runtime_secrets.py)
        ("", "secrets:stepscope-sidecar-token", "get"),  # the training namespace's token (onboarding.py)
        ("", "secrets:stepscope-sidecar-token", "patch"),
    }


def test_namespaced_operator_gets_roles_per_watched_namespace_and_nothing_cluster_wide() -> None:
    docs = render(CI_VALUES)
    grants = _grants(docs, "stepscope-operator", RELEASE_NAMESPACE)
    assert grants == {("namespace", "team-a"): OPERATOR_RULES, ("namespace", "team-b"): OPERATOR_RULES}
    assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding")


@pytest.mark.parametrize(
    ("values", "namespaces"), [("default", {RELEASE_NAMESPACE}), ("ci", {"team-a", "team-b", "team-c"})]
)
def test_the_analyzer_has_no_rights_on_the_api(values: str, namespaces: set[str]) -> None:
    """The analyzer and cleanup Jobs read and write storage only; the operator alone writes a session's status."""
    docs = render(*VALUE_SETS[values])
    for namespace in namespaces:
        assert _grants(docs, "stepscope-analyzer", namespace) == {}
        accounts = {(a["metadata"]["namespace"], a["metadata"]["name"]): a for a in by_kind(docs, "ServiceAccount")}
        assert accounts[(namespace, "stepscope-analyzer")]["automountServiceAccountToken"] is False


def test_operator_token_mounted_only_where_needed() -> None:
    docs = render()
    accounts = {(a["metadata"]["namespace"], a["metadata"]["name"]): a for a in by_kind(docs, "ServiceAccount")}
    assert accounts[(RELEASE_NAMESPACE, "stepscope-operator")]["automountServiceAccountToken"] is False
    deployment = by_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
    assert deployment["serviceAccountName"] == "stepscope-operator"
    assert deployment["automountServiceAccountToken"] is True


def test_rbac_can_be_left_to_the_platform_team() -> None:
    docs = render(sets=("rbac.create=false",))
    assert not [d for d in docs if d["kind"] in ROLE_KINDS + BINDING_KINDS]
