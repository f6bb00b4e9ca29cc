"""Real `/usr/bin/kubectl` against the emulator: apply (validated through the server, no --validate=false), explain
from the OpenAPI documents, printer columns, short name, describe, wait, events, rejections with their messages."""

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
    pytest.mark.timeout(300),
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
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, check=False)


def test_kubectl_apply_get_describe_wait(api: EmulatorServer, tmp_path: Path) -> None:
    applied = kubectl(api, tmp_path, "apply", "-f", str(REPO / "examples" / "profilesession.yaml"))
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
    assert header.split() == [
        "NAME",
        "PHASE",
        "CAPTURED",
        "SLOWEST",
        "CAUSE",
        "BOTTLENECK",
        "GATE",
        "VS",
        "BASELINE",
        "AGE",
    ]
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
    waited = kubectl(api, tmp_path, "wait", "--for=condition=Complete", "--timeout=120s", "profilesession/demo")
    thread.join()
    assert waited.returncode == 0, waited.stderr
    assert "condition met" in waited.stdout
    assert time.monotonic() - started > 0.8  # it waited for the condition


def test_kubectl_rejects_invalid_example_naming_the_field(api: EmulatorServer, tmp_path: Path) -> None:
    out = kubectl(api, tmp_path, "apply", "-f", str(REPO / "examples" / "invalid" / "steps-too-many.yaml"))
    assert out.returncode != 0
    assert "spec.capture.steps" in out.stderr and "is invalid" in out.stderr
    missing = kubectl(api, tmp_path, "create", "-f", str(REPO / "examples" / "invalid" / "missing-storage.yaml"))
    assert missing.returncode != 0 and "spec.storage" in missing.stderr


def test_kubectl_core_resources(api: EmulatorServer, tmp_path: Path) -> None:
    manifest = tmp_path / "secret.yaml"
    manifest.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s3}\ndata: {key: dmFsdWU=}\n")
    created = kubectl(api, tmp_path, "apply", "-f", str(manifest))
    assert created.returncode == 0, created.stderr
    protobuf = kubectl(api, tmp_path, "create", "quota", "pb", "--hard=pods=2")  # a protobuf body of a kind
    assert protobuf.returncode != 0 and "decodes protobuf bodies of" in protobuf.stderr  # outside kube/protobuf.py
    assert api.get("v1", "secrets", "default", "s3")["data"]["key"] == "dmFsdWU="  # type: ignore[index]
    namespaces = kubectl(api, tmp_path, "get", "namespaces")
    assert "default" in namespaces.stdout and "kube-system" in namespaces.stdout
    deleted = kubectl(api, tmp_path, "delete", "secret", "s3")
    assert deleted.returncode == 0, deleted.stderr
    assert api.get("v1", "secrets", "default", "s3") is None


def test_kubectl_get_watch_prints_rows_as_the_status_changes(api: EmulatorServer, tmp_path: Path) -> None:
    applied = kubectl(api, tmp_path, "apply", "-f", str(REPO / "examples" / "profilesession.yaml"))
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
        watcher.wait(60)


def test_kubectl_explain_reads_the_openapi_documents(api: EmulatorServer, tmp_path: Path) -> None:
    capture = kubectl(api, tmp_path, "explain", "profilesession.spec.capture")
    assert capture.returncode == 0, capture.stderr
    assert "GROUP:      stepscope.dev" in capture.stdout and "KIND:       ProfileSession" in capture.stdout
    assert "steps\t<integer>" in capture.stdout and "training steps to record" in capture.stdout
    wait = kubectl(api, tmp_path, "explain", "profs.spec.targets.waitSeconds")
    assert wait.returncode == 0 and "to exist and be Ready" in wait.stdout, wait.stdout + wait.stderr
    pod = kubectl(api, tmp_path, "explain", "pod.spec.containers.env")
    assert pod.returncode == 0 and "EnvVar" in pod.stdout, pod.stdout + pod.stderr
    job = kubectl(api, tmp_path, "explain", "job.spec.completionMode")
    assert job.returncode == 0 and "Indexed" in job.stdout, job.stdout + job.stderr


def test_unknown_fields_and_cel_rules_are_refused_with_their_message(api: EmulatorServer, tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text(
        "apiVersion: stepscope.dev/v1alpha1\nkind: ProfileSession\nmetadata: {name: typo}\n"
        "spec: {targets: {selector: {matchLabels: {app: t}}, rank: '0'}, storage: {uri: 's3://bucket/p'}}\n"
    )
    out = kubectl(api, tmp_path, "apply", "-f", str(typo))
    assert out.returncode != 0 and 'strict decoding error: unknown field "spec.targets.rank"' in out.stderr, out.stderr
    both = kubectl(api, tmp_path, "apply", "-f", str(REPO / "examples" / "invalid" / "both-selector-and-jobref.yaml"))
    assert both.returncode != 0
    assert 'spec.targets: Invalid value: "object": set targets.selector or targets.jobRef, not both' in both.stderr
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b, imag: c}]}\n"
    )
    bad_pod = kubectl(api, tmp_path, "apply", "-f", str(pod))
    assert bad_pod.returncode != 0 and 'unknown field "spec.containers[0].imag"' in bad_pod.stderr, bad_pod.stderr
    dry = kubectl(api, tmp_path, "apply", "--dry-run=server", "-f", str(REPO / "examples" / "profilesession.yaml"))
    assert dry.returncode == 0 and "(server dry run)" in dry.stdout, dry.stderr
    assert api.get(API, "profilesessions", "default", "demo") is None


def test_kubectl_get_events_shows_reason_and_object(api: EmulatorServer, tmp_path: Path) -> None:
    api.apply(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "demo.1", "namespace": "default"},
            "involvedObject": {"kind": "ProfileSession", "name": "demo", "namespace": "default"},
            "reason": "Capturing",
            "message": "signalling 4 sidecar(s)",
            "type": "Normal",
            "count": 3,
            "source": {"component": "stepscope"},
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
        }
    )
    out = kubectl(api, tmp_path, "get", "events")
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()[:2]
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], header
    assert "Normal" in row and "Capturing" in row and "profilesession/demo" in row and "signalling 4" in row, row
    assert "(x3 over" in row
    wide = kubectl(api, tmp_path, "get", "events", "-o", "wide")
    assert "SOURCE" in wide.stdout and "stepscope" in wide.stdout, wide.stdout
