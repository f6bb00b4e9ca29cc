"""The narrower grants around the operator's writes in team namespaces, read from the rendered chart:
- wherever the operator may create Secrets (onboarding.byLabel, sidecar.token.existingSecret) a
  ValidatingAdmissionPolicy, bound with Deny, holds its ServiceAccount (and only it) to Opaque Secrets named like the
  token Secret and ServiceAccounts named like the analyzer's (RBAC alone cannot: `create` takes no resourceNames);
- without those options nothing of the kind is rendered (the operator has no right on Secrets);
- a cluster-wide operator with trainingNamespaces listed creates Jobs only there (a Role per namespace), not
  cluster-wide; with nothing listed, or by label, Jobs stay cluster-wide (the namespaces are not known at render).
"""

from __future__ import annotations

import pytest
from helm_chart import CHART, RELEASE_NAMESPACE, by_kind, grants, render, run_helm

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
OPERATOR_USER = f"system:serviceaccount:{RELEASE_NAMESPACE}:stepscope-operator"
JOBS = {("batch", "jobs", "create"), ("batch", "jobs", "get")}


@pytest.mark.parametrize(
    "sets", [("onboarding.byLabel=true",), ("sidecar.token.existingSecret=mine", "trainingNamespaces={team-a}")]
)
def test_where_the_operator_may_create_secrets_a_policy_holds_it_to_its_token(sets: tuple[str, ...]) -> None:
    docs = render(sets=sets)
    (policy,) = by_kind(docs, "ValidatingAdmissionPolicy")
    (binding,) = by_kind(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"] and "matchResources" not in binding["spec"]
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert set(rule["resources"]) == {"secrets", "serviceaccounts"} and set(rule["operations"]) == {"CREATE", "UPDATE"}
    assert [c["expression"] for c in spec["matchConditions"]] == [f"request.userInfo.username == '{OPERATOR_USER}'"]
    checks = " ".join(v["expression"] for v in spec["validations"])
    assert "object.type == 'Opaque'" in checks and "object.metadata.name == 'stepscope-sidecar-token'" in checks
    assert "object.metadata.name == 'stepscope-analyzer'" in checks


@pytest.mark.parametrize(
    "sets",
    [
        ("sidecar.token.value=0123456789abcdef", "webhook.certManager.enabled=true"),
        ("onboarding.byLabel=true", "onboarding.admissionPolicy=false"),
    ],
)
def test_no_policy_without_secret_writes_or_when_turned_off(sets: tuple[str, ...]) -> None:
    assert not by_kind(render(sets=sets), "ValidatingAdmissionPolicy")


def test_no_policy_for_clusters_without_its_api() -> None:
    args = ["template", "stepscope", str(CHART), "--namespace", RELEASE_NAMESPACE, "--kube-version", "1.29.4"]
    done = run_helm(*args, "--set", "onboarding.byLabel=true")
    assert done.returncode == 0, done.stderr
    assert "ValidatingAdmissionPolicy" not in done.stdout


def test_jobs_only_in_the_listed_training_namespaces() -> None:
    docs = render(sets=("trainingNamespaces={team-a,team-b}",))
    granted = grants(docs, "stepscope-operator", RELEASE_NAMESPACE)
    assert not granted[("cluster", None)] & JOBS
    assert granted[("namespace", "team-a")] >= JOBS and granted[("namespace", "team-b")] >= JOBS
    (operator,) = [r for r in by_kind(render(sets=("onboarding.byLabel=true",)), "ClusterRole")
                   if r["metadata"]["name"] == "stepscope-operator"]  # fmt: skip
    assert {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get"]} in operator["rules"]
