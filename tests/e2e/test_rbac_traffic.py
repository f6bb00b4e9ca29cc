"""RBAC checked against real traffic: a whole session on the local cluster (operator, sidecars, analyzer Job, and the
cleanup Job that deletes the artifacts on delete), then a ProfileTrigger on the same training that fires on its slow
rank, whose session runs and is deleted by its history limit, with the emulator recording which identity made which
request.
Every request of the operator is allowed by the Roles/ClusterRoles the Helm chart renders for the same install
(operator watching `default`, release namespace stepscope-system); every rule the chart grants is used, or listed in
GRANTED_BUT_UNUSED with the reason; the analyzer and cleanup Jobs (the analyzer's ServiceAccount) and the training
pods (sidecars) make no request at all, and nothing else is anonymous but the user's own kubectl."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any as Env  # the e2e fixture's Env (tests/e2e/conftest.py)

import pytest

from stepscope_local.demo import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE
from stepscope_local.install import MASTER_TOKEN
from stepscope_local.kube.identity import ANONYMOUS, Request, service_account_user

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helm"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from helm_chart import HELM, Rule, grants, render
from trigger_manifests import write_trigger

API = "stepscope.dev/v1alpha1"
BUCKET = "stepscope-demo"  # the e2e cluster's bucket

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

OPERATOR = service_account_user(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)
ANALYZER = service_account_user("default", "stepscope-analyzer")
TRAINING = service_account_user("default", "default")

# Rules the chart grants that this session does not exercise, and why they stay.
GRANTED_BUT_UNUSED: dict[str, dict[Rule, str]] = {
    OPERATOR: {
        ("stepscope.dev", "profilesessions/finalizers", "update"): (
            "the API server's OwnerReferencesPermissionEnforcement admission checks it when the operator creates an "
            "analyzer Job whose ownerReference has blockOwnerDeletion; it is a permission check, never a request"
        ),
        ("trainer.kubeflow.org", "trainjobs", "get"): (
            "a session with jobRef kind TrainJob reads it (tests/operator/test_trainjob.py); this one targets a Job"
        ),
        ("jobset.x-k8s.io", "jobsets", "get"): (
            "a JobSet or TrainJob reference reads the JobSet for its ranks (test_trainjob.py); this one targets a Job"
        ),
        ("stepscope.dev", "profilesessions", "get"): (
            "a trigger's session create that finds the session there already (a retry after a lost reply) reads it "
            "(kube.create_session); no create is retried in this run"
        ),
        ("stepscope.dev", "profiletriggers/finalizers", "update"): (
            "OwnerReferencesPermissionEnforcement checks it when the operator creates a session owned by a trigger "
            "(blockOwnerDeletion); a permission check, never a request"
        ),
    },
}


def _used(requests: list[Request]) -> set[Rule]:
    return {(r.group, r.resource, r.verb) for r in requests}


def _allowed(request: Request, granted: dict[tuple[str, str | None], set[Rule]]) -> bool:
    rule = (request.group, request.resource, request.verb)
    if rule in granted.get(("cluster", None), set()):
        return True
    return request.namespace is not None and rule in granted.get(("namespace", request.namespace), set())


def _wait_gone(env: Env, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while env.cluster.api.get(API, "profilesessions", "default", name) is not None:
        assert time.monotonic() < deadline, f"{name} was never released"
        time.sleep(0.5)


def _trigger_fires_and_prunes(e2e: Env, job: str) -> None:
    """A trigger on the training, whose rank 2 is slow: it fires, its session runs, history limit 0 deletes it."""
    limits = {"successfulSessionsHistoryLimit": 0, "failedSessionsHistoryLimit": 0}
    path = write_trigger(e2e.workdir, "rbac-watch", job, {"straggler": {"forSeconds": 0}}, **limits)
    applied = e2e.cluster.kubectl("apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    deadline = time.monotonic() + 300
    while True:
        status = (e2e.cluster.api.get(API, "profiletriggers", "default", "rbac-watch") or {}).get("status") or {}
        sessions = status.get("sessions") or []
        if sessions and sessions[0].get("phase") == "Deleted":
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    _wait_gone(e2e, sessions[0]["name"])


def test_every_request_is_granted_by_the_chart_and_every_grant_is_used(e2e: Env) -> None:
    assert HELM.is_file(), "run `make tools` (the pinned helm binary)"
    e2e.start_training("rbac-train", slow_rank=2)  # one training for the session and then the trigger
    try:
        e2e.ready_pods("rbac-train")
        time.sleep(2)
        e2e.apply_session("rbac", "rbac-train", delete_artifacts=True)
        obj = e2e.wait_phase("rbac")
        assert obj["status"]["phase"] in ("Succeeded", "PartiallySucceeded"), obj["status"]
        folder = obj["status"]["artifactsUri"].removeprefix(f"s3://{BUCKET}/")
        assert e2e.cluster.s3 is not None
        s3 = e2e.cluster.s3.client()
        assert s3.list_objects_v2(Bucket=BUCKET, Prefix=folder + "/").get("KeyCount", 0) > 0
        e2e.cluster.api.delete(API, "profilesessions", "default", "rbac")
        _wait_gone(e2e, "rbac")
        assert s3.list_objects_v2(Bucket=BUCKET, Prefix=folder + "/").get("KeyCount", 0) == 0
        _trigger_fires_and_prunes(e2e, "rbac-train")
    finally:
        e2e.stop_training("rbac-train")

    audit = e2e.cluster.api.audit
    # the local cluster hands the operator its master token and runs no webhook: the values under which the chart
    # leaves neither to the operator (what runtime_secrets.py is granted: tests/helm/test_rbac.py)
    docs = render(
        sets=(
            "operator.watchNamespaces={default}",
            f"sidecar.token.value={MASTER_TOKEN}",
            "webhook.certManager.enabled=true",
        )
    )
    report: list[str] = []
    for user, account, namespace in ((OPERATOR, OPERATOR_ACCOUNT, OPERATOR_NAMESPACE),):
        requests = audit.requests(user)
        assert requests, f"{user} made no request: is its kubeconfig used?"
        granted = grants(docs, account, namespace)
        denied = sorted({(r.group, r.resource, r.verb, r.namespace) for r in requests if not _allowed(r, granted)})
        all_granted = set().union(*granted.values())
        unused = all_granted - _used(requests) - set(GRANTED_BUT_UNUSED[user])
        report.append(f"{user}: used {sorted(_used(requests))}")
        assert not denied, f"{user} made requests the chart does not grant: {denied}\n" + "\n".join(report)
        assert not unused, f"{user} is granted rules it never used: {sorted(unused)}\n" + "\n".join(report)
        assert set(GRANTED_BUT_UNUSED[user]) <= all_granted, "a documented grant is no longer in the chart"
    assert not audit.requests(TRAINING), f"training pods called the API: {audit.requests(TRAINING)[:5]}"
    assert not audit.requests(ANALYZER), f"the analyzer called the API: {audit.requests(ANALYZER)[:5]}"
    assert grants(docs, "stepscope-analyzer", "default") == {}
    # kubectl sends no bearer token over plain HTTP: the user's `kubectl apply` of the session is anonymous here
    anonymous = {(r.resource, r.verb) for r in audit.requests(ANONYMOUS)}
    allowed = {(kind, verb) for kind in ("profilesessions", "profiletriggers") for verb in ("create", "get")}
    assert anonymous <= allowed, audit.requests(ANONYMOUS)
