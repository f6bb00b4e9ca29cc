"""`stepscope demo`: the whole product on one machine. Local cluster, operator, a 4-rank DDP training with one rank
planted slow, `kubectl apply` of a ProfileSession, progress as `kubectl get profilesessions -w` shows it, then the
verdict and the report. Everything started is stopped at the end."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepscope_local.demo_session import follow_session, report_outcome, say, wait_operator_healthy, wait_ready_pods
from stepscope_local.install import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, TRAINING_NAMESPACE, install, start_operator
from stepscope_local.manifests import session_yaml, training_job
from stepscope_local.ports import free_port
from stepscope_local.runner.pods import kill_group

if TYPE_CHECKING:
    from stepscope_local.cluster import LocalCluster

BIN = Path(sys.executable).parent
__all__ = ["OPERATOR_ACCOUNT", "OPERATOR_NAMESPACE", "main"]  # the operator's identity, as tests read it


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


def run(args: argparse.Namespace) -> int:
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(workdir / "cluster", ignore_errors=True)  # the previous run's logs and volumes
    for stale in ("report.html", "report.json", "operator.log"):
        (workdir / stale).unlink(missing_ok=True)
    started = time.monotonic()
    say(f"starting the local cluster (workdir {workdir})")
    from stepscope_local.cluster import LocalCluster  # the emulator, S3 and the runner: only to run the demo

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
