"""Following a ProfileSession in the demo's local cluster: the operator's and the training pods' readiness, the
session's progress as `kubectl get profilesessions -w` shows it, and its outcome (verdict, report, session folder)."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from stepscope_contract.storage import (
    REPORT_HTML,
    REPORT_JSON,
    TRACES_DIR,
    AddressingStyle,
    FetchLayout,
    StorageLocation,
    parse_storage_uri,
)
from stepscope_local.runner.pods import kill_group
from stepscope_storage import Store, open_store
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials
from stepscope_storage.fetch import fetch_session

if TYPE_CHECKING:
    from stepscope_local.cluster import LocalCluster

API = "stepscope.dev/v1alpha1"
TERMINAL = ("Succeeded", "PartiallySucceeded", "Failed")
REPORTED = ("Succeeded", "PartiallySucceeded")
"""the phases that end with a report: the session's message is its verdict"""


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def wait_operator_healthy(operator: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    """Wait until the operator answers on its liveness endpoint (its imports take seconds on a busy machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and operator.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def wait_ready_pods(cluster: LocalCluster, count: int, timeout: float, job: str = "ddp-train") -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = cluster.api.list("v1", "pods", "default", f"job-name={job}")
        ready = [
            p
            for p in pods
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        ]
        if len(ready) >= count:
            return ready
        failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        if failed:
            raise RuntimeError(f"training pod {failed[0]['metadata']['name']} failed; see {cluster.logs_dir}")
        time.sleep(0.5)
    raise RuntimeError(f"the training pods were not Ready within {timeout:.0f} s; see {cluster.logs_dir}")


def relay(stream: IO[str], prefix: str) -> None:
    for line in stream:
        print(f"{prefix}{line.rstrip()}", flush=True)


def _row(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    summary = status.get("summary") or {}
    cells = [
        obj["metadata"]["name"],
        status.get("phase", ""),
        status.get("progress", ""),
        str(summary.get("slowestRank", "")),
        summary.get("cause", "") or "",
        summary.get("topBottleneck", "") or "",
    ]
    return "  " + "   ".join(f"{c:<10}" for c in cells).rstrip()


def follow_session(cluster: LocalCluster, name: str, timeout: float) -> dict[str, Any] | None:
    """Stream `kubectl get profilesessions -w` until the session is terminal (or the timeout); without kubectl,
    print the same columns from the API."""
    exe = shutil.which("kubectl")
    watcher = None
    thread = None
    if exe:
        watcher = subprocess.Popen(
            [
                exe,
                "--kubeconfig",
                str(cluster.kubeconfig_path),
                "--cache-dir",
                str(cluster.workdir / "kubectl-cache"),
                "get",
                "profilesessions",
                name,
                "-w",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert watcher.stdout is not None
        thread = threading.Thread(target=relay, args=(watcher.stdout, "  "), daemon=True)
        thread.start()
    deadline = time.monotonic() + timeout
    obj = None
    last = ""
    try:
        while time.monotonic() < deadline:
            obj = cluster.api.get(API, "profilesessions", "default", name)
            if obj and watcher is None and _row(obj) != last:
                last = _row(obj)
                print(last, flush=True)
            if obj and (obj.get("status") or {}).get("phase") in TERMINAL:
                time.sleep(1.0)  # let the watch print the last line
                return cluster.api.get(API, "profilesessions", "default", name)
            time.sleep(0.5)
        say(f"the session did not finish within {timeout:.0f} s")
        return obj
    finally:
        if watcher is not None:
            kill_group(watcher, 2)
        if thread is not None:
            thread.join(5)


def explain_failure(status: dict[str, Any], workdir: Path) -> None:
    for cond in status.get("conditions") or []:
        failed = cond.get("type") == "Failed"
        if (failed and cond.get("status") == "True") or (not failed and cond.get("status") == "False"):
            message = f": {cond['message']}" if cond.get("message") else ""  # a failure's why is the session's
            say(f"condition {cond.get('type')}={cond.get('status')}: {cond.get('reason')}{message}")
    told = str(status.get("message") or "")
    for target in status.get("targets") or []:
        if target.get("state") not in ("Captured",):
            why = str(target.get("message") or "")
            why = "" if why in told else f" {why}"  # the session's message names it already: told once
            say(f"target {target.get('pod')} (rank {target.get('rank')}): {target.get('state')}{why}")
    say(f"logs: {workdir / 'operator.log'} and {workdir / 'cluster' / 'logs'}")


def _local_store(cluster: LocalCluster, location: StorageLocation) -> Store:
    """The local S3 server's bucket of `location`, through stepscope_storage as every component reaches it."""
    connection = Connection(endpoint=cluster.s3_endpoint, addressing_style=AddressingStyle.PATH)
    return open_store(location, connection, Credentials(cluster.s3_access_key, cluster.s3_secret_key))


def fetch_report(cluster: LocalCluster, status: dict[str, Any], out_dir: Path) -> Path | None:
    url = status.get("reportURL")
    if not url or cluster.s3 is None:
        return None
    target = out_dir / REPORT_HTML
    for name, key in ((REPORT_HTML, "reportURL"), (REPORT_JSON, "reportJSONURL")):
        if status.get(key):
            location = parse_storage_uri(status[key])
            _local_store(cluster, location).get_file(location.prefix, out_dir / name)
    return target


def fetch_session_folder(cluster: LocalCluster, status: dict[str, Any], out_dir: Path) -> Path | None:
    """The whole session folder the report lies in (<session>/report/report.html) into out_dir/session, as
    `stepscope fetch` lays it out: the report's links to every rank's trace work there, and
    TraceAnalysis(trace_dir=out_dir/session/traces) loads every rank. The path of that copy of report.html."""
    url = status.get("reportURL")
    if not url or cluster.s3 is None:
        return None
    report = parse_storage_uri(url)
    parts = report.prefix.split("/")
    if len(parts) < 3:
        return None
    session = StorageLocation(report.scheme, report.bucket, "/".join(parts[:-2]))
    dest = out_dir / "session"
    shutil.rmtree(dest, ignore_errors=True)
    fetch_session(_local_store(cluster, session), session, dest, FetchLayout.SESSION)
    copy = dest / parts[-2] / parts[-1]
    return copy if copy.is_file() else None


def report_outcome(
    cluster: LocalCluster, obj: dict[str, Any] | None, workdir: Path, *, tools_hint: bool = False
) -> tuple[str | None, Path | None]:
    """Print the session's phase, verdict (its message: told once), report and session folder (and how to open the
    traces in HTA and TensorBoard); explain a failure; return the phase and the report's path."""
    status = (obj or {}).get("status") or {}
    phase = status.get("phase")
    message = str(status.get("message") or "")
    say(f"session phase: {phase}")
    if message:
        say(f"{'verdict' if phase in REPORTED else 'message'}: {message}")
    report = fetch_report(cluster, status, workdir) if phase in TERMINAL else None
    if report is not None:
        say(f"report: {report}")
        linked = fetch_session_folder(cluster, status, workdir)
        if linked is not None:
            say(f"session folder, where the report links to each rank's trace: {linked}")
            if tools_hint:
                traces = linked.parent.parent / TRACES_DIR
                say(f'HTA: TraceAnalysis(trace_dir="{traces}")   TensorBoard: tensorboard --logdir {traces.parent}')
    if phase != "Succeeded":
        explain_failure(status, workdir)
    return phase, report
