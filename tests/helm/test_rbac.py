"""Least privilege, read from the rendered chart: the exact rules each account gets, no wildcard anywhere, no
reading of Secrets, namespaced Roles when namespaces are watched and ClusterRoles only otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from helm_chart import CI_VALUES, RELEASE_NAMESPACE, by_kind, render

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

VALUE_SETS = {"default": (), "ci": (CI_VALUES,)}
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")

Rule = tuple[str, str, str]  # (apiGroup, resource, verb)

OPERATOR_RULES: set[Rule] = {
    *{("stepscope.dev", "profilesessions", v) for v in ("get", "list", "watch", "patch", "update")},
    *{("stepscope.dev", "profilesessions/status", v) for v in ("get", "patch", "update")},
    ("stepscope.dev", "profilesessions/finalizers", "update"),
    *{("", "pods", v) for v in ("get", "list", "watch")},
    *{("batch", "jobs", v) for v in ("create", "get", "list", "watch")},
    ("", "events", "create"),
    ("", "events", "patch"),
    ("trainer.kubeflow.org", "trainjobs", "get"),
    ("jobset.x-k8s.io", "jobsets", "get"),
}
CRD_RULES: set[Rule] = {("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("get", "list", "watch")}
ANALYZER_RULES: set[Rule] = {
    ("stepscope.dev", "profilesessions", "get"),
    ("stepscope.dev", "profilesessions/status", "patch"),
}


def _flatten(role: dict[str, Any]) -> set[Rule]:
    out: set[Rule] = set()
    for rule in role.get("rules") or []:
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out.add((group, resource, verb))
    return out


def _roles(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in ROLE_KINDS]


def _grants(docs: list[dict[str, Any]], account: str, namespace: str) -> dict[tuple[str, str | None], set[Rule]]:
    """What a ServiceAccount may do, per (scope, namespace): ('cluster', None) or ('namespace', ns)."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in _roles(docs)}
    out: dict[tuple[str, str | None], set[Rule]] = {}
    for binding in (d for d in docs if d["kind"] in BINDING_KINDS):
        subjects = binding["subjects"]
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == account and s["namespace"] == namespace for s in subjects
        ):
            continue
        ref = binding["roleRef"]
        role_ns = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_ns, ref["name"])]
        scope = (
            ("cluster", None)
            if binding["kind"] == "ClusterRoleBinding"
            else ("namespace", binding["metadata"]["namespace"])
        )
        out.setdefault(scope, set()).update(_flatten(role))
    return out


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_no_wildcards_and_no_secret_access(values: str) -> None:
    docs = render(*VALUE_SETS[values])
    assert _roles(docs)
    for role in _roles(docs):
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert all("*" not in item for item in rule[key]), (role["metadata"]["name"], rule)
        for _group, resource, verb in _flatten(role):
            assert resource.split("/")[0] != "secrets", (role["metadata"]["name"], verb)
            assert verb not in {"escalate", "bind", "impersonate"}


def test_cluster_wide_operator_gets_cluster_roles_with_exactly_its_handlers_needs() -> None:
    docs = render()
    grants = _grants(docs, "stepscope-operator", RELEASE_NAMESPACE)
    assert grants == {("cluster", None): OPERATOR_RULES | CRD_RULES}
    assert not by_kind(docs, "Role")


def test_namespaced_operator_gets_roles_per_watched_namespace_and_only_crd_reads_cluster_wide() -> None:
    docs = render(CI_VALUES)
    grants = _grants(docs, "stepscope-operator", RELEASE_NAMESPACE)
    assert grants == {
        ("cluster", None): CRD_RULES,
        ("namespace", "team-a"): OPERATOR_RULES,
        ("namespace", "team-b"): OPERATOR_RULES,
    }
    assert {r["metadata"]["name"] for r in by_kind(docs, "ClusterRole")} == {"stepscope-operator-crds"}


@pytest.mark.parametrize(
    ("values", "namespaces"), [("default", {RELEASE_NAMESPACE}), ("ci", {"team-a", "team-b", "team-c"})]
)
def test_analyzer_may_only_read_its_session_and_patch_its_status(values: str, namespaces: set[str]) -> None:
    docs = render(*VALUE_SETS[values])
    for namespace in namespaces:
        grants = _grants(docs, "stepscope-analyzer", namespace)
        # bound in its own namespace only, never cluster-wide
        assert grants == {("namespace", namespace): ANALYZER_RULES}


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
