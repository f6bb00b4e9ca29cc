"""`stepscope local-cluster` runs until SIGINT, prints where things are, and stops cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_local_cluster_command(tmp_path: Path) -> None:
    stepscope = Path(sys.executable).parent / "stepscope"
    proc = subprocess.Popen(
        [str(stepscope), "local-cluster", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(5)]
    kubeconfig = Path(lines[0].split(":", 1)[1].strip())
    assert kubeconfig.exists() and "S3 endpoint: http://127.0.0.1:" in lines[2]
    children = psutil.Process(proc.pid).children(recursive=True)
    got = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "c"), "get", "crd", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "profilesessions.stepscope.dev" in got.stdout
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "local cluster stopped" in out
    assert children and not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
