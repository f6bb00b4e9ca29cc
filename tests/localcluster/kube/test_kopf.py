"""A real kopf operator process against the emulator: finalizer, status patch, delete handling, events."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stepscope_local.kube import EmulatorServer

from ..conftest import session_body

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
API = "stepscope.dev/v1alpha1"
HANDLERS = Path(__file__).with_name("kopf_handlers.py")


def _eventually(check: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_kopf_operator_finalizes_patches_status_and_handles_delete(api: EmulatorServer, tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(api.kubeconfig_path)}
    log_path = tmp_path / "kopf.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", "default", str(HANDLERS)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        api.apply(session_body("k1"))
        obj = _eventually(
            lambda: (
                (o := api.get(API, "profilesessions", "default", "k1"))
                and (o.get("status") or {}).get("phase") == "Pending"
                and o
            )
        )
        assert obj["metadata"]["finalizers"], "kopf adds its finalizer"
        assert obj["metadata"]["generation"] == 1
        events = _eventually(
            lambda: [e for e in api.list("v1", "events", "default") if e["involvedObject"]["name"] == "k1"]
        )
        assert any(e.get("message") == "accepted k1" and e.get("reason") == "Accepted" for e in events)

        api.delete(API, "profilesessions", "default", "k1")
        _eventually(lambda: api.get(API, "profilesessions", "default", "k1") is None)
        _eventually(lambda: "DELETE-HANDLED k1" in log_path.read_text())
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    output = log_path.read_text()
    assert "Traceback" not in output, output[-3000:]
