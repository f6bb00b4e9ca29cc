"""`stepscope local-cluster` across restarts of the same workdir, and when its operator is not healthy:

- a new emulator in a workdir an earlier one used hands out kubeconfigs naming its own port, not the earlier one's;
- `--background`, `--stop`, `--background` again: the second operator serves the second cluster (a session gets a
  phase);
- an operator that exits, or that answers /healthz but never reaches this API server, makes `--background` exit
  with status 1 and print why with the last lines of the operator's log, and no export lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from stepscope_local.kube import EmulatorServer
from stepscope_local.kube.identity import service_account_user

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
REPO = Path(__file__).resolve().parents[2]
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")


def _server_of(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def test_a_new_emulator_in_the_same_workdir_rewrites_the_identity_kubeconfigs(tmp_path: Path) -> None:
    user = service_account_user("stepscope-system", "stepscope-operator")
    with EmulatorServer(workdir=tmp_path) as first:
        old = first.kubeconfig_for(user)
        assert _server_of(old) == first.url
    with EmulatorServer(workdir=tmp_path) as second:
        assert second.url != first.url
        assert _server_of(second.kubeconfig_for(user)) == second.url
        assert _server_of(second.kubeconfig_path) == second.url


def _local_cluster(workdir: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STEPSCOPE, "local-cluster", "--workdir", str(workdir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )


def _kubectl(env_lines: str, *args: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = next(line for line in env_lines.splitlines() if line.startswith("export KUBECONFIG="))
    return subprocess.run(
        ["/usr/bin/kubectl", "--kubeconfig", kubeconfig.split("=", 1)[1].strip("'"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )


def _session_phase(env_lines: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    phase = ""
    while time.monotonic() < deadline and not phase:
        got = _kubectl(env_lines, "get", "profilesession", "trainer-minimal", "-o", "jsonpath={.status.phase}")
        phase = got.stdout.strip()
        time.sleep(0.5)
    return phase


def test_background_stop_background_serves_sessions_again(tmp_path: Path) -> None:
    for start in (1, 2):
        started = _local_cluster(tmp_path, "--background")
        try:
            assert started.returncode == 0, f"start {start}: {started.stderr}"
            applied = _kubectl(started.stdout, "apply", "-f", "examples/profilesession-minimal.yaml")
            assert applied.returncode == 0, applied.stderr
            assert _session_phase(started.stdout, 120), f"start {start}: the session got no phase"
        finally:
            stopped = _local_cluster(tmp_path, "--stop", timeout=180)
        assert stopped.returncode == 0, stopped.stderr


STANDINS = {
    "exits": "import sys; print('boom: no API server'); sys.exit(3)",
    # answers /healthz but never talks to the API server (as an operator with a stale kubeconfig does at first)
    "never reaches the API": (
        "import http.server, os\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')\n"
        "print('boom: serving healthz only', flush=True)\n"
        "http.server.HTTPServer(('0.0.0.0', int(os.environ['STEPSCOPE_HEALTH_PORT'])), H).serve_forever()\n"
    ),
}


@pytest.mark.parametrize(
    ("standin", "reason"),
    [("exits", "it exited with status 3"), ("never reaches the API", "made no request to the API server")],
)
def test_an_unhealthy_operator_fails_loudly(tmp_path: Path, standin: str, reason: str) -> None:
    command = json.dumps([sys.executable, "-c", STANDINS[standin]])
    got = _local_cluster(tmp_path, "--background", "--operator-timeout", "8", "--operator-command", command)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "export " not in got.stdout
    assert reason in got.stderr and "boom" in got.stderr, got.stderr
    assert not (tmp_path / "local-cluster.pid").exists() or _local_cluster(tmp_path, "--stop").returncode == 1
    assert not os.path.exists(tmp_path / "env.sh")
