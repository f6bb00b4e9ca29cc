"""`stepscope check` against the local cluster with the real operator: every check passes (the webhook check says
why it is skipped there); it fails naming `operator` when the operator is stopped and `storage` when the credentials
Secret is wrong or gone; the probes leave nothing behind."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stepscope_cli.commands.check_report import CheckResult, Outcome, exit_code, render
from stepscope_local.cluster import LocalCluster
from stepscope_local.demo_session import wait_operator_healthy
from stepscope_local.install import install, start_operator
from stepscope_local.ports import free_port
from stepscope_local.runner.pods import kill_group

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")


@dataclass
class Install:
    cluster: LocalCluster
    operator: subprocess.Popen[bytes]

    def check(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [STEPSCOPE, "check", "--kubeconfig", str(self.cluster.kubeconfig_path), *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    workdir = tmp_path_factory.mktemp("check")
    with LocalCluster(workdir=workdir / "cluster") as cluster:
        install(cluster)
        health = free_port()
        operator = start_operator(cluster, workdir, health_port=health)
        try:
            assert wait_operator_healthy(operator, health, 180), (workdir / "operator.log").read_text()[-3000:]
            yield Install(cluster, operator)
        finally:
            kill_group(operator, 10)


def _rows(out: str) -> dict[str, str]:
    return {
        line.split()[0]: line.split()[1] for line in out.splitlines()[1:] if len(line.split()) > 1 and line[0] != " "
    }


def test_passes_on_the_local_cluster(local: Install) -> None:
    result = local.check()
    assert result.returncode == 0, result.stdout + result.stderr
    rows = _rows(result.stdout)
    assert rows["crd"] == rows["operator"] == rows["team"] == rows["storage"] == "ok", result.stdout
    assert rows["webhook"] == "skip" and "runs no admission webhooks" in result.stdout, result.stdout
    assert "all checks passed" in result.stdout
    assert local.cluster.api.list("stepscope.dev/v1alpha1", "profilesessions", "default") == []  # probe removed


def test_a_wrong_secret_fails_the_storage_check(local: Install) -> None:
    secret = local.cluster.api.get("v1", "secrets", "default", "stepscope-s3")
    assert secret is not None
    try:
        local.cluster.create_secret("default", "stepscope-s3", {"access-key": "x", "secret-key": "y"})
        result = local.check("--skip", "operator")
        assert result.returncode == 1
        assert "1 check(s) failed: storage" in result.stdout, result.stdout
        assert "Secret default/stepscope-s3 has no key AWS_ACCESS_KEY_ID" in result.stdout, result.stdout
        local.cluster.api.delete("v1", "secrets", "default", "stepscope-s3")
        gone = local.check("--skip", "operator")
        assert gone.returncode == 1 and "Secret default/stepscope-s3 cannot be read (404)" in gone.stdout, gone.stdout
        assert "2 check(s) failed: team, storage" in gone.stdout  # team: and how to create it
        assert "lacks the storage credentials Secret stepscope-s3: create it (kubectl -n default" in gone.stdout
    finally:
        local.cluster.api.apply(
            {k: v for k, v in secret.items() if k != "metadata"}
            | {"metadata": {"name": "stepscope-s3", "namespace": "default"}}
        )
    assert local.check("--skip", "operator").returncode == 0


def test_a_stopped_operator_fails_the_operator_check(local: Install) -> None:
    kill_group(local.operator, 10)
    result = local.check("--timeout", "3")  # nobody answers: the whole timeout passes
    assert result.returncode == 1
    assert "1 check(s) failed: operator" in result.stdout, result.stdout
    assert "no operator processed the probe session" in result.stdout
    assert local.cluster.api.list("stepscope.dev/v1alpha1", "profilesessions", "default") == []


def test_render_names_the_failures() -> None:
    results = [
        CheckResult("crd", Outcome.OK, "fine"),
        CheckResult("webhook", Outcome.SKIP, "not here"),
        CheckResult("storage", Outcome.FAIL, "no bucket"),
    ]
    text = render(results)
    assert text.splitlines()[0].split() == ["CHECK", "RESULT", "DETAIL"]
    assert text.endswith("1 check(s) failed: storage") and exit_code(results) == 1
    assert exit_code(results[:2]) == 0 and render(results[:2]).endswith("all checks passed (some skipped, see above)")
