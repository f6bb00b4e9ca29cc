"""Real `/usr/bin/kubectl` against the emulator: apply, printer columns, short name, describe, wait, rejection."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from stepscope_local.kube import EmulatorServer

from ..conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]
API = "stepscope.dev/v1alpha1"


def kubectl(api: EmulatorServer, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        shutil.which("kubectl") or "kubectl",
        "--kubeconfig",
        str(api.kubeconfig_path),
        "--cache-dir",
        str(cache),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


def test_kubectl_apply_get_describe_wait(api: EmulatorServer, tmp_path: Path) -> None:
    applied = kubectl(api, tmp_path, "apply", "--validate=false", "-f", str(REPO / "examples" / "profilesession.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert "profilesession.stepscope.dev/demo created" in applied.stdout
    api.patch_status(
        API,
        "profilesessions",
        "default",
        "demo",
        {"phase": "Capturing", "progress": "3/4", "reportURL": "s3://b/r.html"},
    )

    table = kubectl(api, tmp_path, "get", "profilesessions")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "PHASE", "CAPTURED", "SLOWEST", "CAUSE", "BOTTLENECK", "AGE"]
    assert row.split()[:3] == ["demo", "Capturing", "3/4"]
    wide = kubectl(api, tmp_path, "get", "profs", "-o", "wide")
    assert wide.returncode == 0, wide.stderr
    assert "REPORT" in wide.stdout and "s3://b/r.html" in wide.stdout

    described = kubectl(api, tmp_path, "describe", "profilesession", "demo")
    assert described.returncode == 0, described.stderr
    assert "Name:         demo" in described.stdout and "Capturing" in described.stdout

    def complete_later() -> None:
        time.sleep(1.0)
        api.patch_status(
            API,
            "profilesessions",
            "default",
            "demo",
            {
                "phase": "Succeeded",
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "True",
                        "reason": "Done",
                        "message": "ok",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            },
        )

    thread = threading.Thread(target=complete_later)
    thread.start()
    started = time.monotonic()
    waited = kubectl(api, tmp_path, "wait", "--for=condition=Complete", "--timeout=10s", "profilesession/demo")
    thread.join()
    assert waited.returncode == 0, waited.stderr
    assert "condition met" in waited.stdout
    assert 0.8 < time.monotonic() - started < 10


def test_kubectl_rejects_invalid_example_naming_the_field(api: EmulatorServer, tmp_path: Path) -> None:
    out = kubectl(
        api, tmp_path, "apply", "--validate=false", "-f", str(REPO / "examples" / "invalid" / "steps-too-many.yaml")
    )
    assert out.returncode != 0
    assert "spec.capture.steps" in out.stderr and "is invalid" in out.stderr
    missing = kubectl(
        api, tmp_path, "create", "--validate=false", "-f", str(REPO / "examples" / "invalid" / "missing-storage.yaml")
    )
    assert missing.returncode != 0 and "spec.storage" in missing.stderr


def test_kubectl_core_resources(api: EmulatorServer, tmp_path: Path) -> None:
    manifest = tmp_path / "secret.yaml"
    manifest.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s3}\ndata: {key: dmFsdWU=}\n")
    created = kubectl(api, tmp_path, "apply", "--validate=false", "-f", str(manifest))
    assert created.returncode == 0, created.stderr
    protobuf = kubectl(api, tmp_path, "create", "configmap", "pb", "--from-literal=a=b")
    assert protobuf.returncode != 0 and "JSON bodies only" in protobuf.stderr  # documented fidelity gap
    assert api.get("v1", "secrets", "default", "s3")["data"]["key"] == "dmFsdWU="  # type: ignore[index]
    namespaces = kubectl(api, tmp_path, "get", "namespaces")
    assert "default" in namespaces.stdout and "kube-system" in namespaces.stdout
    deleted = kubectl(api, tmp_path, "delete", "secret", "s3")
    assert deleted.returncode == 0, deleted.stderr
    assert api.get("v1", "secrets", "default", "s3") is None


def test_kubectl_get_watch_prints_rows_as_the_status_changes(api: EmulatorServer, tmp_path: Path) -> None:
    applied = kubectl(api, tmp_path, "apply", "--validate=false", "-f", str(REPO / "examples" / "profilesession.yaml"))
    assert applied.returncode == 0, applied.stderr
    cmd = [
        shutil.which("kubectl") or "kubectl",
        "--kubeconfig",
        str(api.kubeconfig_path),
        "--cache-dir",
        str(tmp_path),
        "get",
        "profilesessions",
        "-w",
    ]
    watcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert watcher.stdout is not None
        header = watcher.stdout.readline()
        assert header.split()[:3] == ["NAME", "PHASE", "CAPTURED"]
        assert watcher.stdout.readline().split()[0] == "demo"
        for phase, progress in (("Capturing", "1/4"), ("Analyzing", "4/4")):
            api.patch_status(API, "profilesessions", "default", "demo", {"phase": phase, "progress": progress})
            assert watcher.stdout.readline().split()[:3] == ["demo", phase, progress]
    finally:
        watcher.terminate()
        watcher.wait(10)
