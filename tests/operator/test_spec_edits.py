"""Editing a session after it started: the API server refuses a change of a frozen field with the CRD's CEL message
(`kubectl` shows it); a field the CRD still lets through (`ttlSecondsAfterFinished`) is named in a
`SpecChangeIgnored` condition and Warning event. The operator's log lines (not verbose) carry a timestamp and the
session's namespace/name, and no "Timer 'lifecycle' succeeded." on every tick."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from operator_harness import API, SIDECAR_TOKEN, OperatorProcess, add_pod, session, wait_for
from standin_sidecar import SidecarFleet

from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _kubectl(api: EmulatorServer, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(api.kubeconfig_path), "--cache-dir", str(tmp / "kc"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_edits_are_refused_or_named(api: EmulatorServer, tmp_path: Path) -> None:
    op = OperatorProcess(api, tmp_path, verbose=False)
    op.start()
    try:
        with SidecarFleet(SIDECAR_TOKEN, 1, upload_after=60.0, base="127.0.16.") as fleet:
            (sidecar,) = fleet.sidecars
            add_pod(api, "edit-0", sidecar.host, sidecar.port, {"app": "edit"}, env=[{"name": "RANK", "value": "0"}])
            api.apply(session("edits", {"selector": {"matchLabels": {"app": "edit"}}}))
            wait_for(api, "edits", ("Capturing",))

            refused = _kubectl(
                api, tmp_path, "patch", "profs", "edits", "--type=merge", "-p", '{"spec":{"capture":{"steps":9}}}'
            )
            assert refused.returncode != 0
            assert "spec.capture cannot change once the session exists" in refused.stderr, refused.stderr

            allowed = _kubectl(
                api,
                tmp_path,
                "patch",
                "profs",
                "edits",
                "--type=merge",
                "-p",
                '{"spec":{"ttlSecondsAfterFinished":60}}',
            )
            assert allowed.returncode == 0, allowed.stderr
            deadline = time.monotonic() + 120
            accepted: dict[str, str] = {}
            while time.monotonic() < deadline:
                obj = api.get(API, "profilesessions", "default", "edits") or {}
                conditions = (obj.get("status") or {}).get("conditions") or []
                accepted = next((c for c in conditions if c["type"] == "Accepted"), {})
                if accepted.get("reason") == "SpecChangeIgnored":
                    break
                time.sleep(0.3)
            assert accepted.get("reason") == "SpecChangeIgnored", accepted
            assert accepted["message"].startswith("spec.ttlSecondsAfterFinished changed after the session started")
            warnings: list[dict[str, Any]] = []
            while time.monotonic() < deadline:  # kopf posts the event after the patch, on its own schedule
                warnings = [e for e in api.list("v1", "events", "default") if e.get("reason") == "SpecChangeIgnored"]
                if warnings:
                    break
                time.sleep(0.3)
            assert warnings and warnings[0]["type"] == "Warning"
            assert warnings[0]["source"]["component"] == "stepscope"  # kopf's reporting component
    finally:
        op.kill(signal.SIGTERM)
    log = op.log()
    assert "Timer 'lifecycle' succeeded." not in log
    lines = [line for line in log.splitlines() if "[default/edits]" in line]
    assert any("Capturing" in line for line in lines), log[-2000:]
    assert all(re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line) for line in lines), lines[:3]
