"""`stepscope local-cluster` in the foreground: `export` lines a shell can eval (KUBECONFIG, the S3 endpoint and keys)
then `#` comments, the same lines in env.sh, a second cluster in the same workdir refused, and Ctrl-C stopping
everything. The background mode with the operator (`eval "$(stepscope local-cluster --background)"`, `--stop`) is
what the README's first-contact blocks do: tests/docs/test_readme.py runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")


def _shell(env_lines: str, script: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'set -e; eval "$ENV_LINES"; {script}'],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=cwd,
        env={**os.environ, "ENV_LINES": env_lines, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie; it may exit between any two looks at it."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_foreground_prints_the_lines_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [STEPSCOPE, "local-cluster", "--no-operator", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    while not lines or not lines[-1].startswith("# Ctrl-C"):
        line = proc.stdout.readline()
        assert line, "".join(lines)
        lines.append(line)
    assert lines[0].startswith("export KUBECONFIG=") and "operator: not started (--no-operator)" in "".join(lines)
    names = [line.split("=", 1)[0] for line in lines if line.startswith("export ")]
    assert names == [f"export {n}" for n in ("KUBECONFIG", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID")] + [
        "export AWS_SECRET_ACCESS_KEY",
        "export AWS_DEFAULT_REGION",
    ]
    assert all(line.startswith(("export ", "#")) for line in lines), lines
    assert (tmp_path / "env.sh").read_text() in "".join(lines)
    children = psutil.Process(proc.pid).children(recursive=True)
    again = subprocess.run(
        [STEPSCOPE, "local-cluster", "--workdir", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert again.returncode == 1 and "already runs" in again.stderr
    got = _shell("".join(lines), "kubectl get crd -o name")
    assert "profilesessions.stepscope.dev" in got.stdout, got.stderr
    s3 = _shell("".join(lines), 'python -c \'import boto3; print(boto3.client("s3").list_buckets()["Buckets"])\'')
    assert "stepscope-demo" in s3.stdout and "stepscope-traces" in s3.stdout, s3.stdout + s3.stderr
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "local cluster stopped" in out
    assert children and not any(_alive(c) for c in children)
