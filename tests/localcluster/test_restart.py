"""`stepscope local-cluster` across restarts of the same workdir, and when its operator is not healthy:

- a new emulator in a workdir an earlier one used hands out kubeconfigs naming its own port, not the earlier one's;
- `--background`, `--stop`, `--background` again: the second operator serves the second cluster (a session gets a
  phase);
- an operator killed under a running cluster is started again, the log says so, and the new one finishes a session;
  a killed object store comes back on its port; `--stop` stops the operator even when the cluster's process is gone;
- an operator that exits, or that answers /healthz but never reaches this API server, makes `--background` exit
  with status 1 and print why with the last lines of the operator's log, and no export lines.
"""

from __future__ import annotations

import json
import os
import signal
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


def _session_phase(env_lines: str, timeout: float, phases: tuple[str, ...] = ()) -> str:
    """The session's phase once it has one (one of `phases` when given), '' when none came within `timeout`."""
    deadline = time.monotonic() + timeout
    phase = ""
    while time.monotonic() < deadline:
        got = _kubectl(env_lines, "get", "profilesession", "trainer-minimal", "-o", "jsonpath={.status.phase}")
        phase = got.stdout.strip()
        if phase and (not phases or phase in phases):
            return phase
        time.sleep(0.5)
    return ""


def _minimal_session(workdir: Path) -> Path:
    """examples/profilesession-minimal.yaml, not waiting for pods to appear (none will)."""
    doc = yaml.safe_load((REPO / "examples" / "profilesession-minimal.yaml").read_text())
    doc["spec"]["targets"]["waitSeconds"] = 0
    path = workdir / "session.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _recorded_pid(workdir: Path, name: str) -> int:
    return int((workdir / "pids" / f"{name}.pid").read_text())


def _wait_log(workdir: Path, text: str, timeout: float) -> str:
    log = workdir / "local-cluster.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in (got := log.read_text(errors="replace")):
            return got
        time.sleep(0.5)
    raise AssertionError(f"{text!r} never in {log}:\n{log.read_text(errors='replace')[-3000:]}")


def _kill_operator_and_object_store(workdir: Path) -> None:
    """SIGKILL both: each comes back (the log says so), the object store on its port."""
    operator, store = _recorded_pid(workdir, "operator"), _recorded_pid(workdir, "object-store")
    os.killpg(operator, signal.SIGKILL)
    os.killpg(store, signal.SIGKILL)
    log = _wait_log(workdir, "# the operator restarted (restart 1)", 60)
    assert "# the operator exited with -9; restarting it" in log, log[-3000:]
    log = _wait_log(workdir, "# the object store restarted (restart 1)", 60)
    assert _recorded_pid(workdir, "operator") != operator and _recorded_pid(workdir, "object-store") != store


def test_background_stop_background_serves_sessions_again(tmp_path: Path) -> None:
    for start in (1, 2):
        started = _local_cluster(tmp_path, "--background")
        try:
            assert started.returncode == 0, f"start {start}: {started.stderr}"
            if start == 2:
                _kill_operator_and_object_store(tmp_path)
            applied = _kubectl(started.stdout, "apply", "-f", str(_minimal_session(tmp_path)))
            assert applied.returncode == 0, applied.stderr
            if start == 1:
                assert _session_phase(started.stdout, 120), f"start {start}: the session got no phase"
            else:  # the restarted operator finishes it (no pod is labelled app=trainer)
                finished = _session_phase(started.stdout, 180, ("Failed", "Succeeded", "PartiallySucceeded"))
                assert finished == "Failed", f"the restarted operator did not finish the session: {finished!r}"
        finally:
            if start == 2:  # the cluster's own process dies: --stop still stops the operator it left
                os.kill(int((tmp_path / "local-cluster.pid").read_text()), signal.SIGKILL)
                left = _recorded_pid(tmp_path, "operator")
            stopped = _local_cluster(tmp_path, "--stop", timeout=180)
        assert stopped.returncode == 0, stopped.stderr
    assert "stopped what it left: operator" in stopped.stdout, stopped.stdout
    assert not Path(f"/proc/{left}").exists() or "operator" not in Path(f"/proc/{left}/cmdline").read_text()


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
