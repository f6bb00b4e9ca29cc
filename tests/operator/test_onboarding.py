"""Adding a team without hand work (operator/stepscope_operator/onboarding/namespaces.py, onboarding_handlers.py):

- what a labelled namespace gets, as data: its own derived token Secret and the analyzer ServiceAccount (no
  RoleBinding: the analyzer needs no API rights);
  a Secret holding another token is patched, one holding the right token is left alone;
- with the real operator on the local cluster: a namespace listed in STEPSCOPE_ONBOARD_NAMESPACES gets its token
  Secret at start, one that cannot be written is retried without holding the start up; a new namespace is reported
  by `stepscope check -n TEAM` as lacking the token Secret, the analyzer account and the credentials Secret, with the
  fixes; after `kubectl label namespace TEAM stepscope.dev/profiling=enabled` and `kubectl create secret generic` of
  the team's credentials, the check passes.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stepscope_contract.tokens import namespace_token
from stepscope_local.cluster import LocalCluster
from stepscope_local.install import MASTER_TOKEN, ONBOARDING_ENV, install, start_operator
from stepscope_local.operator_health import wait_operator_ready
from stepscope_local.ports import free_port
from stepscope_local.runner.pods import kill_group
from stepscope_operator.onboarding.namespaces import (
    OnboardingSettings,
    collection_path,
    refusal,
    stale_secret_patch,
    team_objects,
    wants_onboarding,
)

STEPSCOPE = str(Path(sys.executable).parent / "stepscope")


@pytest.mark.unit
def test_a_labelled_namespace_gets_its_own_token_and_the_analyzer_account() -> None:
    settings = OnboardingSettings.from_env(
        {
            "STEPSCOPE_ONBOARD_LABEL": "true",
            "STEPSCOPE_ONBOARD_NAMESPACES": "a, b",
        }
    )
    assert settings.by_label and settings.listed == ("a", "b") and settings.token_secret == "stepscope-sidecar-token"
    assert wants_onboarding({"stepscope.dev/profiling": "enabled"}) and not wants_onboarding({"team": "x"})
    secret, account = team_objects("team-x", "master-of-all-tokens", settings)
    assert base64.b64decode(secret["data"]["token"]).decode() == namespace_token("master-of-all-tokens", "team-x")
    assert collection_path(secret) == "/api/v1/namespaces/team-x/secrets"
    assert account["metadata"]["name"] == "stepscope-analyzer" and account["metadata"]["namespace"] == "team-x"
    assert account["automountServiceAccountToken"] is False  # the analyzer Jobs need no API token
    assert collection_path(account) == "/api/v1/namespaces/team-x/serviceaccounts"
    assert stale_secret_patch(secret, secret) is None
    assert stale_secret_patch({"data": {"token": "b2xk"}}, secret) == {"data": {"token": secret["data"]["token"]}}
    kinds = [o["kind"] for o in team_objects("team-x", "m" * 20, OnboardingSettings())]
    assert kinds == ["Secret", "ServiceAccount"]  # nothing bound, whatever the settings


@pytest.mark.unit
def test_the_operator_writes_only_its_opaque_token_secret_and_the_analyzer_account() -> None:
    settings = OnboardingSettings()
    for obj in team_objects("team-x", "m" * 20, settings):
        assert refusal(obj, settings) is None
    secret, account = team_objects("team-x", "m" * 20, settings)
    minted = {**secret, "type": "kubernetes.io/service-account-token"}
    minted["metadata"] = {**secret["metadata"], "annotations": {"kubernetes.io/service-account.name": "admin"}}
    assert "not a kubernetes.io/service-account-token Secret" in str(refusal(minted, settings))
    assert refusal({**secret, "metadata": {**secret["metadata"], "name": "other"}}, settings) is not None
    assert refusal({**account, "metadata": {**account["metadata"], "name": "admin"}}, settings) is not None
    assert refusal({"kind": "RoleBinding", "metadata": {"name": "x"}}, settings) is not None


def _check(cluster: LocalCluster, namespace: str, *skip: str) -> subprocess.CompletedProcess[str]:
    args = [a for s in skip for a in ("--skip", s)]
    return subprocess.run(
        [STEPSCOPE, "check", "--kubeconfig", str(cluster.kubeconfig_path), "-n", namespace, "--timeout", "60", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _wait_for(
    cluster: LocalCluster, namespace: str, name: str, api: tuple[str, str] = ("v1", "secrets"), timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := cluster.api.get(*api, namespace, name)) is not None:
            return found
        time.sleep(0.3)
    raise AssertionError(f"no {api[1]} {namespace}/{name} within {timeout} s")


@pytest.mark.integration
@pytest.mark.timeout(400)
def test_a_team_is_onboarded_by_label_and_check_says_what_is_missing(tmp_path: Path) -> None:
    with LocalCluster(workdir=tmp_path / "cluster") as cluster:
        install(cluster)
        health = free_port()
        env = {**ONBOARDING_ENV, "STEPSCOPE_ONBOARD_NAMESPACES": "Not_A_Namespace,listed-team"}
        operator = start_operator(cluster, tmp_path, health_port=health, extra_env=env)
        try:
            problem = wait_operator_ready(cluster, operator, health, 180)
            assert problem is None, f"{problem}: {(tmp_path / 'operator.log').read_text()[-3000:]}"
            listed = _wait_for(cluster, "listed-team", "stepscope-sidecar-token")
            assert base64.b64decode(listed["data"]["token"]).decode() == namespace_token(MASTER_TOKEN, "listed-team")
            log = (tmp_path / "operator.log").read_text()
            assert "no token Secret in namespace Not_A_Namespace yet" in log  # retried later, the start not held

            assert cluster.kubectl("create", "namespace", "team-x").returncode == 0
            before = _check(cluster, "team-x", "operator", "storage")
            assert before.returncode == 1, before.stdout + before.stderr
            assert (
                "namespace team-x lacks the sidecar token Secret, the analyzer ServiceAccount (stepscope-analyzer), "
                "the storage credentials Secret stepscope-s3: label the namespace stepscope.dev/profiling=enabled"
            ) in before.stdout, before.stdout
            assert "--from-literal=AWS_ACCESS_KEY_ID=" in before.stdout

            labelled = cluster.kubectl("label", "namespace", "team-x", "stepscope.dev/profiling=enabled")
            assert labelled.returncode == 0, labelled.stderr
            token = _wait_for(cluster, "team-x", "stepscope-sidecar-token")
            assert base64.b64decode(token["data"]["token"]).decode() == namespace_token(MASTER_TOKEN, "team-x")
            account = _wait_for(cluster, "team-x", "stepscope-analyzer", ("v1", "serviceaccounts"))
            assert account["automountServiceAccountToken"] is False
            created = cluster.kubectl(
                "-n", "team-x", "create", "secret", "generic", "stepscope-s3",
                f"--from-literal=AWS_ACCESS_KEY_ID={cluster.s3_access_key}",
                f"--from-literal=AWS_SECRET_ACCESS_KEY={cluster.s3_secret_key}",
            )  # fmt: skip
            assert created.returncode == 0, created.stderr
            after = _check(cluster, "team-x")
            assert after.returncode == 0, after.stdout + after.stderr
            assert (
                "namespace team-x: token Secret stepscope-sidecar-token, ServiceAccount stepscope-analyzer"
                in after.stdout
            )
        finally:
            kill_group(operator, 10)
