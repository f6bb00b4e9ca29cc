"""Helpers of the operator integration tests: the real `stepscope operator` process, pod objects, sessions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope_contract.analysis_documents import AnalysisOutcome, termination_message
from stepscope_contract.session import ReportSummary
from stepscope_contract.tokens import namespace_token
from stepscope_local.kube import EmulatorServer
from stepscope_local.ports import free_port

REPO = Path(__file__).resolve().parents[2]
API = "stepscope.dev/v1alpha1"
TOKEN = "operator-test-token"  # the operator's master token
SIDECAR_TOKEN = namespace_token(TOKEN, "default")  # what the sidecars of namespace default accept
TERMINAL = ("Succeeded", "PartiallySucceeded", "Failed")


@dataclass
class OperatorProcess:
    api: EmulatorServer
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    extra_env: dict[str, str] | None = None
    verbose: bool = True

    def start(self) -> None:
        token = self.workdir / "token"
        token.write_text(TOKEN)
        health = free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(self.api.kubeconfig_path),
            "STEPSCOPE_SIDECAR_TOKEN_FILE": str(token),
            "STEPSCOPE_WATCH_NAMESPACES": "default",
            "STEPSCOPE_TICK_SECONDS": "0.3",
            "STEPSCOPE_SIGNAL_ATTEMPTS": "2",
            "STEPSCOPE_SIGNAL_TIMEOUT_SECONDS": "2",
            "STEPSCOPE_METRICS_PORT": str(free_port()),
            "STEPSCOPE_HEALTH_PORT": str(health),
            **(self.extra_env or {}),
        }
        log = (self.workdir / "operator.log").open("ab")
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "stepscope"), "operator", *(["--verbose"] if self.verbose else [])],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        raise AssertionError("operator never became healthy:\n" + self.log()[-3000:])

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(20)

    def log(self) -> str:
        path = self.workdir / "operator.log"
        return path.read_text(errors="replace") if path.exists() else ""


def add_pod(
    api: EmulatorServer,
    name: str,
    ip: str,
    port: int,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    ready: bool = True,
    env: list[dict[str, str]] | None = None,
    node: str = "node-a",
) -> None:
    api.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": labels,
                "annotations": {"stepscope.dev/sidecar-port": str(port), **(annotations or {})},
            },
            "spec": {"nodeName": node, "containers": [{"name": "trainer", "image": "trainer:1", "env": env or []}]},
        }
    )
    api.patch_status(
        "v1",
        "pods",
        "default",
        name,
        {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    )


def session(name: str, targets: dict[str, Any], **capture: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ProfileSession",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "targets": targets,
            "capture": {"steps": 3, "timeoutSeconds": 180, **capture},
            "storage": {"uri": "s3://bucket/prefix", "credentialsSecret": {"name": "s3-creds"}},
        },
    }


def wait_for(api: EmulatorServer, name: str, phases: tuple[str, ...], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    obj: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        obj = api.get(API, "profilesessions", "default", name)
        if obj and (obj.get("status") or {}).get("phase") in phases:
            return obj
        time.sleep(0.2)
    raise AssertionError(f"{name} never reached {phases}: {(obj or {}).get('status')}")


def events_with(
    api: EmulatorServer, reason: str, at_least: int = 1, about: str | None = None, timeout: float = 20
) -> list[dict[str, Any]]:
    """The namespace's events of `reason` (about the object named `about`, if given), once there are `at_least` of
    them, or at the timeout whatever is there. kopf posts an event from its own queue after the handler's status
    patch, so a phase can be read before its event."""
    deadline = time.monotonic() + timeout
    while True:
        found = [
            e
            for e in api.list("v1", "events", "default")
            if e.get("reason") == reason and about in (None, (e.get("involvedObject") or {}).get("name"))
        ]
        if len(found) >= at_least or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def times_told(status: dict[str, Any], text: str) -> int:
    """How often `text` is in what `kubectl describe` shows of a session's words: its message, its conditions'
    messages and its summary."""
    words = [status.get("message") or "", *(c.get("message") or "" for c in status.get("conditions") or [])]
    words.append(json.dumps(status.get("summary") or {}))
    return sum(w.count(text) for w in words)


def finish_analysis(
    api: EmulatorServer, name: str, outcome: AnalysisOutcome | None = None, job_status: dict[str, Any] | None = None
) -> None:
    """Play the Job controller and the analyzer: the Job's pod ends with the outcome as its termination message
    (what the analyzer hands back: by default a report with a balanced verdict), then the Job completes (or ends
    with `job_status`: a later attempt that failed)."""
    job_name = f"{name}-analyze"
    outcome = outcome or AnalysisOutcome(
        ok=True,
        message="No slow rank: balanced.",
        summary=ReportSummary(verdict="No slow rank: balanced."),
        report_url="s3://bucket/prefix/report/report.html",
    )
    pod = f"{job_name}-0-abcde"
    job = api.get("batch/v1", "jobs", "default", job_name)
    assert job is not None
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job["metadata"]["uid"]}
    api.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod,
                "namespace": "default",
                "labels": {"job-name": job_name},
                "ownerReferences": [owner],
            },
            "spec": {"containers": [{"name": "analyzer", "image": "analyzer:1"}]},
        }
    )
    terminated = {"exitCode": 0 if outcome.ok else 1, "reason": "Completed" if outcome.ok else "Error",
                  "finishedAt": "2026-01-01T00:00:00Z", "message": termination_message(outcome)}  # fmt: skip
    api.patch_status(
        "v1",
        "pods",
        "default",
        pod,
        {"phase": "Succeeded", "containerStatuses": [{"name": "analyzer", "state": {"terminated": terminated}}]},
    )
    api.patch_status(
        "batch/v1",
        "jobs",
        "default",
        job_name,
        job_status or {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
    )
