"""`stepscope demo`: the whole product on one machine. Local cluster, operator, a 4-rank DDP training with one rank
planted slow, `kubectl apply` of a ProfileSession, progress as `kubectl get profilesessions -w` shows it, then the
verdict and the report. Everything started is stopped at the end."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

from stepscope_contract.storage import (
    REPORT_HTML,
    REPORT_JSON,
    TRACES_DIR,
    AddressingStyle,
    FetchLayout,
    StorageLocation,
    parse_storage_uri,
)
from stepscope_local.cluster import LocalCluster
from stepscope_local.install import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, TRAINING_NAMESPACE, install, start_operator
from stepscope_local.manifests import session_yaml, training_job
from stepscope_local.ports import free_port
from stepscope_local.runner.pods import kill_group
from stepscope_storage import Store, open_store
from stepscope_storage.connection import Connection
from stepscope_storage.credentials import Credentials
from stepscope_storage.fetch import fetch_session

API = "stepscope.dev/v1alpha1"
TERMINAL = ("Succeeded", "PartiallySucceeded", "Failed")
BIN = Path(sys.executable).parent
__all__ = ["OPERATOR_ACCOUNT", "OPERATOR_NAMESPACE", "main"]  # the operator's identity, as tests read it


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


FAULT_LOG = {"hang": "hangs at step", "desync": "desyncs at step"}


def planted(mode: str, rank: int, slow_ms: float, after: int) -> str:
    if mode == "hang":
        return f"rank {rank} stops for good in its data loading after {after} steps"
    if mode == "desync":
        return f"rank {rank} broadcasts where the others all_reduce, after {after} steps"
    return f"rank {rank} planted slow ({mode}, {slow_ms:g} ms/step)"


def wait_fault(cluster: LocalCluster, pods: list[dict[str, Any]], mode: str, timeout: float) -> None:
    """Wait until the planted hang or desync has happened (its rank says so in its log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(FAULT_LOG[mode] in cluster.pod_log("default", p["metadata"]["name"], "trainer") for p in pods):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the planted {mode} did not happen within {timeout:.0f} s; see {cluster.logs_dir}")


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
            say(f"condition {cond.get('type')}={cond.get('status')}: {cond.get('reason')}: {cond.get('message')}")
    for target in status.get("targets") or []:
        if target.get("state") not in ("Captured",):
            say(
                f"target {target.get('pod')} (rank {target.get('rank')}): {target.get('state')} "
                f"{target.get('message', '')}"
            )
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


def run(args: argparse.Namespace) -> int:
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(workdir / "cluster", ignore_errors=True)  # the previous run's logs and volumes
    for stale in ("report.html", "report.json", "operator.log"):
        (workdir / stale).unlink(missing_ok=True)
    started = time.monotonic()
    say(f"starting the local cluster (workdir {workdir})")
    with LocalCluster(workdir=workdir / "cluster") as cluster:
        say(f"API {cluster.api.url}  kubeconfig {cluster.kubeconfig_path}  S3 {cluster.s3_endpoint}")
        install(cluster)  # storage settings, Secrets, the training script, buckets: what `local-cluster` sets up
        health_port = free_port()
        command = json.loads(args.operator_command)
        operator = start_operator(cluster, workdir, command, health_port, namespaces=TRAINING_NAMESPACE)
        say(f"operator started (pid {operator.pid}, log {workdir / 'operator.log'})")
        try:
            if args.trigger:
                from stepscope_local.demo_trigger import run_trigger

                return run_trigger(args, cluster, workdir, operator=operator, health_port=health_port, started=started)
            stands_still = args.slow_mode in FAULT_LOG and args.slow_rank >= 0
            extra = {"HANG_AFTER_STEPS": str(args.fault_after)} if stands_still else None
            cluster.api.apply(
                training_job(
                    free_port(),
                    args.slow_rank,
                    args.slow_mode,
                    args.slow_ms,
                    extra,
                    storage_endpoint=cluster.s3_endpoint,
                )
            )
            fault = planted(args.slow_mode, args.slow_rank, args.slow_ms, args.fault_after)
            say(f"training Job ddp-train: 4 ranks, {fault if args.slow_rank >= 0 else 'no rank planted slow'}")
            pods = sorted(wait_ready_pods(cluster, 4, args.ready_timeout), key=lambda p: p["metadata"]["name"])
            say(
                "pods Ready: "
                + ", ".join(
                    f"{p['metadata']['name']} ({p['status']['podIP']} on {p['spec']['nodeName']})" for p in pods
                )
            )
            time.sleep(args.warmup)
            if stands_still:
                wait_fault(cluster, pods, args.slow_mode, args.ready_timeout)
                say(f"the job stands still: {fault}")
            if args.operator_health_timeout > 0 and not wait_operator_healthy(
                operator, health_port, args.operator_health_timeout
            ):
                say("the operator is not answering on /healthz yet; applying the session anyway")
            if operator.poll() is not None:
                raise RuntimeError(f"the operator exited with {operator.returncode}; see {workdir / 'operator.log'}")
            session_file = workdir / "profilesession.yaml"
            # a job that already stands still: the hooks declare the hang after a short step timeout
            capture = {"stepTimeoutSeconds": args.hang_timeout} if stands_still else None
            session_file.write_text(session_yaml(capture))  # no endpoint: the install's storage settings give it
            applied = cluster.kubectl("apply", "-f", str(session_file))
            say(f"kubectl apply -f examples/profilesession.yaml: {(applied.stdout or applied.stderr).strip()}")
            if applied.returncode != 0:
                return 1
            obj = follow_session(cluster, "demo", args.timeout)
            phase, report = report_outcome(cluster, obj, workdir, tools_hint=True)
            say(f"done in {time.monotonic() - started:.0f} s")
            return 0 if phase in ("Succeeded", "PartiallySucceeded") and report is not None else 1
        finally:
            kill_group(operator, 5)
            say("stopping everything")


def report_outcome(
    cluster: LocalCluster, obj: dict[str, Any] | None, workdir: Path, *, tools_hint: bool = False
) -> tuple[str | None, Path | None]:
    """Print the session's phase, verdict, report and session folder (and how to open the traces in HTA and
    TensorBoard); explain a failure; return the phase and the report's path."""
    status = (obj or {}).get("status") or {}
    phase = status.get("phase")
    message = str(status.get("message") or "")
    summary = status.get("summary") or {}
    verdict = str(summary.get("verdict") or "")
    head = verdict.rstrip(" .")
    if head and message.startswith(head):  # the message opens with the verdict: told once, on its own line
        message = message[len(head) :].lstrip(" .;")
    say(f"session phase: {phase}" + (f" ({message})" if message else ""))
    if verdict:
        say(f"verdict: {verdict}")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stepscope demo", description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, default=Path(".demo"), help="cluster, logs and the report land here")
    parser.add_argument("--slow-rank", type=int, default=2, help="the rank planted slow; -1: none (balanced)")
    parser.add_argument(
        "--slow-mode",
        choices=["host", "compute", "hang", "desync"],
        default="host",
        help="host: a stall before each step; compute: extra matmuls; hang: the rank stops in its data loading; "
        "desync: the rank broadcasts where the others all-reduce",
    )
    parser.add_argument("--slow-ms", type=float, default=60.0, help="how much slower the planted rank is per step")
    parser.add_argument(
        "--fault-after", type=int, default=20, help="hang/desync: steps before the slow rank stops or desyncs"
    )
    parser.add_argument("--hang-timeout", type=int, default=5, help="hang/desync: the session's stepTimeoutSeconds")
    parser.add_argument("--ready-timeout", type=float, default=120.0, help="seconds to wait for the training pods")
    parser.add_argument(
        "--trigger",
        action="store_true",
        help="no session by hand: the ProfileTrigger examples/triggers/profiletrigger.yaml fires when the slow rank "
        "slows down (after --slow-after balanced steps) and creates the session",
    )
    parser.add_argument("--slow-after", type=int, default=600, help="--trigger: balanced steps before the slowdown")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of training before the session")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds to wait for a terminal phase")
    parser.add_argument(
        "--operator-health-timeout", type=float, default=90.0, help="seconds to wait for the operator's /healthz"
    )
    parser.add_argument(
        "--operator-command",
        default=json.dumps([str(BIN / "stepscope"), "operator"]),
        help="JSON list: the operator process to run",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        return run(args)
    except KeyboardInterrupt:
        say("interrupted; everything was stopped")
        return 130
    except RuntimeError as exc:
        say(f"failed: {exc}")
        return 1
    finally:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)
