"""The tokens the chart hands out, used against a real sidecar: the Secret the chart writes into team-b opens
team-b's sidecars, the one it writes into team-a does not (401), and neither is the master the operator holds."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helm_chart import CI_VALUES, by_kind, one, render

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _status(url: str, token: str) -> int:
    request = urllib.request.Request(f"{url}/v1/status", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_a_token_from_namespace_a_is_refused_by_the_sidecars_of_namespace_b(tmp_path: Path) -> None:
    docs = render(CI_VALUES)
    tokens = {
        s["metadata"]["namespace"]: base64.b64decode(s["data"]["token"]).decode()
        for s in by_kind(docs, "Secret")
        if s["metadata"]["name"] == "stepscope-sidecar-token"
    }
    master = base64.b64decode(one(docs, "Secret", "-sidecar-master")["data"]["token"]).decode()
    (tmp_path / "token").write_text(tokens["team-b"])
    port_file = tmp_path / "port"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEPSCOPE_", "AWS_"))}
    env["STEPSCOPE_POD_NAMESPACE"] = "team-b"
    args = ["sidecar", "--host", "127.0.0.1", "--port", "0", "--hook-dir", str(tmp_path / "run")]
    args += ["--token-file", str(tmp_path / "token"), "--port-file", str(port_file)]
    with (tmp_path / "sidecar.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "stepscope_cli.main", *args], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "sidecar.log").read_text()
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        assert _status(url, tokens["team-b"]) == 200
        assert _status(url, tokens["team-a"]) == 401
        assert _status(url, tokens["team-c"]) == 401
        assert _status(url, master) == 401
        assert json.dumps(sorted(tokens)) == '["team-a", "team-b", "team-c"]'
    finally:
        proc.terminate()
        proc.wait(10)
