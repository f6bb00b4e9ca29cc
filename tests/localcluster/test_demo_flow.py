"""`stepscope demo`'s own steps with a stand-in operator: cluster, secrets, training pods Ready, kubectl apply,
`kubectl get -w` progress, verdict, report download, and a clean stop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_demo_flow_with_a_standin_operator(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    standin = json.dumps([sys.executable, str(Path(__file__).with_name("standin_operator.py"))])
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "stepscope"),
            "demo",
            "--workdir",
            str(tmp_path),
            "--warmup",
            "0",
            "--ready-timeout",
            "300",
            "--timeout",
            "240",
            "--operator-health-timeout",
            "0",
            "--operator-command",
            standin,
        ],
        capture_output=True,
        text=True,
        timeout=560,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "pods Ready: ddp-train-0-" in out, out[-4000:]
    assert "profilesession.stepscope.dev/demo created" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  demo")]
    assert ["demo", "Analyzing", "4/4"] in [r[:3] for r in rows] and rows[-1][:3] == ["demo", "Succeeded", "4/4"]
    assert "verdict: Rank 2 (stand-in)" in out and out.count("Rank 2 (stand-in)") == 1, out[-4000:]  # told once
    assert (tmp_path / "report.html").read_text() == "<html>stand-in</html>"
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
